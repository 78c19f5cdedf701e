"""An MTU black hole's effect, measured: what size passes and what stalls.

Builds a lab with a TCP echo server, applies `mtu_blackhole` toward the server at each MTU, and
finds by bisection the largest write that makes its round trip (each probe on a fresh connection:
a stalled write blocks everything behind it); then shows that a write one byte larger delivers
nothing in the wait, that the router's ICMP "fragmentation needed" was sent and filtered, and how
long after revert the stuck write arrives. A faithful black hole passes exactly `mtu` - 52 bytes
(IPv4 20 + TCP 20 + timestamps 12). Needs root for the lab.

    python bench/mtu_bench.py [--mtu 1200 1400] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from datetime import datetime

import measure
import table
from table import Measure, Row, alone

from faultlab.lab.netns import NetnsLab

PORT = 9000
# IPv4 and TCP headers with the timestamp option, which Linux peers always agree on.
HEADERS = 52
# How long a probe waits for its echo: the lab's round trip is well under a millisecond.
WAIT_S = 0.4


async def _send(lab: NetnsLab, size: int, wait_s: float
                ) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
    """How much of a write of `size` bytes on a new connection comes back within `wait_s`."""
    sock = await lab.client.run(measure.tcp_socket)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (str(lab.server_address), PORT))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(b"m" * size)
    back, until = 0, loop.time() + wait_s
    while back < size and (left := until - loop.time()) > 0:
        try:
            back += len(await asyncio.wait_for(reader.read(size - back), left))
        except TimeoutError:
            break
    return back, reader, writer


async def black_hole(mtu: int) -> dict[str, float]:
    """The largest write that passes at `mtu`, what a larger one delivers, the ICMP filtered,
    and the seconds from revert to the stuck write's arrival."""
    async with NetnsLab() as lab:
        server = await asyncio.start_server(measure.echo,
                                            sock=await lab.server.run(measure.tcp_socket, PORT))
        ctx = measure.context(lab)
        hole = measure.fault_of("mtu_blackhole", "bench-mtu", mtu=mtu, direction="to_server")
        await hole.apply(ctx)
        low, high = 1, 1448  # passes / the largest segment a 1500-byte link carries
        while low < high:
            mid = (low + high + 1) // 2
            back, _, writer = await _send(lab, mid, WAIT_S)
            writer.close()
            low, high = (mid, high) if back == mid else (low, mid - 1)
        stalled, reader, writer = await _send(lab, low + 1, 2 * WAIT_S)
        icmp = await lab.router.run(measure.chain_packets, "FL-bench-mtu")
        reverted = time.monotonic()
        await hole.revert(ctx)
        await asyncio.wait_for(reader.readexactly(low + 1 - stalled), 30)
        recovered_s = time.monotonic() - reverted
        writer.close()
        server.close()
        return {"passes": low, "stalled_delivered": stalled, "icmp": icmp,
                "recovered_s": recovered_s}


def collect(mtus: Sequence[int] = (1200, 1400)) -> list[Row]:
    rows = []
    for mtu in mtus:
        m = asyncio.run(black_hole(mtu))
        expected = mtu - HEADERS
        print(f"mtu {mtu}: the largest write that passes is {m['passes']:.0f} B (expected "
              f"{expected}); {m['passes'] + 1:.0f} B stalls ({m['stalled_delivered']:.0f} B back "
              f"in {2 * WAIT_S:g} s, {m['icmp']:.0f} ICMP frag-needed filtered); after revert it "
              f"arrived in {m['recovered_s']:.2f} s", flush=True)
        rows.append(alone(f"MTU black hole {mtu}: largest write that passes",
                          Measure(m["passes"], "B"), "higher", f"= {expected} B (mtu - 52)",
                          m["passes"] == expected,
                          note=f"mtu: {m['passes'] + 1:.0f} B stalls, "
                               f"{m['stalled_delivered']:.0f} B delivered, {m['icmp']:.0f} ICMP "
                               f"frag-needed filtered at the router; the stuck write arrived "
                               f"{m['recovered_s']:.2f} s after revert"))
        rows.append(alone(f"MTU black hole {mtu}: revert -> stuck write delivered",
                          Measure(m["recovered_s"], "s"), "lower", "<= 2 s",
                          m["recovered_s"] <= 2.0 and m["stalled_delivered"] == 0))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mtu", type=int, nargs="+", default=[1200, 1400])
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock, machine = datetime.now(), time.monotonic(), table.machine()
    rows = collect(args.mtu)
    table.finish(rows, args.json, machine, started, time.monotonic() - clock)


if __name__ == "__main__":
    main()
