"""The time from trigger to a forged reset on the wire (forge_rst), beside the scapy recipe a user
would otherwise write, on the same flows in the same lab.

    python bench/middlebox_bench.py [-n 20] [--json FILE]

A TCP flow between the lab's client and server: the client sends one byte every 5 ms (the server
reads), one new connection per repetition. faultlab's forge_rst toward the client (its
`rst_after_ms`: from the step firing to the RST handed to the kernel) alternates with scapy in the
router's namespace (imported beforehand, so only the exchange is timed): `sniff` the client's next
segment on the client link, `send` a RST at its ACK number through a raw socket. Either counts only
when the client's connection was reset. Then an idle flow (nothing sent after the handshake):
faultlab probes it after 50 ms; the scapy recipe would wait forever (no peer).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import time
from types import SimpleNamespace
from typing import Any

import table
from table import Measure, Row, alone, versus

from faultlab.connections import ConnectionTable
from faultlab.faults.forge_rst import ForgeRst, ForgeRstParams
from faultlab.lab.netns import NetnsLab

PORT = 9000
SERVER = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT})); s.listen(64)
import threading
def drain(c):
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""
# One connection after another: each prints `port P`, sends a byte every `every` s (nothing when
# 0) until it is reset, then prints `reset P`.
CLIENT = """
import socket, sys, time
every = float(sys.argv[2])
while True:
    try:
        c = socket.create_connection((sys.argv[1], {port}))
    except ConnectionRefusedError:  # the server is still starting
        time.sleep(0.05)
        continue
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a segment per send
    port = c.getsockname()[1]
    print("port", port, flush=True)
    try:
        while True:
            if every:
                c.send(b"x"); time.sleep(every)
            elif c.recv(1) == b"":
                break
    except OSError:
        print("reset", port, flush=True)
""".replace("{port}", str(PORT))


def scapy_rst(iface: str, client: str, client_port: int, server: str) -> float:
    """The recipe, in the calling thread's namespace: ms from start to the RST sent."""
    from scapy.all import L3RawSocket, conf, send, sniff
    from scapy.layers.inet import IP, TCP

    conf.L3socket = L3RawSocket  # the kernel routes it (scapy's own table is the host's)
    started = time.perf_counter()
    seen = sniff(iface=iface, count=1, timeout=2, store=True,
                 lfilter=lambda p: TCP in p and p[IP].src == client and p[TCP].sport == client_port)
    seg = seen[0]
    send(IP(src=server, dst=client) / TCP(sport=PORT, dport=client_port, flags="R",
                                           seq=seg[TCP].ack), verbose=False)
    return (time.perf_counter() - started) * 1000


async def flows(lab: NetnsLab, every_s: float) -> tuple[Any, Any]:
    env = {"PATH": "/usr/bin:/bin"}
    server = await lab.spawn("server", [sys.executable, "-c", SERVER], env)
    client = await lab.spawn("client", [sys.executable, "-c", CLIENT, str(lab.server_address),
                                        str(every_s)], env, stdout=asyncio.subprocess.PIPE)
    return server, client


async def next_line(client: Any, word: str) -> int:
    line = (await asyncio.wait_for(client.stdout.readline(), 5)).decode().split()
    assert line and line[0] == word, f"the client said {line!r}, not {word}"
    return int(line[1])


async def measure(n: int, every_s: float, with_scapy: bool) -> tuple[list[float], list[float]]:
    """(faultlab's rst_after_ms, scapy's) over `n` connections each, alternating."""
    ours: list[float] = []
    theirs: list[float] = []
    async with NetnsLab() as lab:
        server, client = await flows(lab, every_s)
        try:
            await asyncio.sleep(0.3)
            table_ = ConnectionTable(PORT)
            ctx = SimpleNamespace(lab=lab, connections=table_, proxy=None, mic=None)
            for i in range(n * (2 if with_scapy else 1)):
                port = await next_line(client, "port")
                table_.observe_syn(str(lab.client_address), port, str(lab.server_address), PORT,
                                   time.monotonic())
                await asyncio.sleep(0.05)
                if i % 2 == 0 or not with_scapy:
                    fault = ForgeRst(f"b{i}", ForgeRstParams(toward="client"))
                    ours.append(float((await fault.apply(ctx))["rst_after_ms"]))
                else:
                    theirs.append(await lab.router.run(
                        scapy_rst, lab.client_link, str(lab.client_address), port,
                        str(lab.server_address)))
                assert await next_line(client, "reset") == port
        finally:
            for proc in (client, server):
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
    return ours, theirs


def collect(n: int = 20) -> list[Row]:
    ours, theirs = asyncio.run(measure(n, 0.005, with_scapy=True))
    med, peer = statistics.median(ours), statistics.median(theirs)
    print(f"{'forged RST on the wire, active flow':<44} {med:>10.2f} ms  goal <= 15")
    print(f"{'  scapy sniff + send':<44} {peer:>10.2f} ms")
    idle, _ = asyncio.run(measure(max(n // 2, 3), 0.0, with_scapy=False))
    idle_med = statistics.median(idle)
    print(f"{'forged RST on the wire, idle flow (probed)':<44} {idle_med:>10.2f} ms  goal <= 60")
    return [
        versus("forged RST on the wire, active flow (median)", Measure(med, "ms"),
               "scapy sniff + send", Measure(peer, "ms"), "lower", at_least=1,
               also=med <= 15, goal="<= 15 ms",
               note=f"forge_rst toward the client of a flow sending a byte every 5 ms: "
                    f"rst_after_ms (step fired to RST sent) beside scapy's sniff of the client's "
                    f"next segment and send of the RST in the router's namespace (scapy "
                    f"imported beforehand), alternating, every RST checked by the client's "
                    f"reset; medians of {n}"),
        alone("forged RST on the wire, idle flow (median)", Measure(idle_med, "ms"), "lower",
              "<= 60 ms", idle_med <= 60,
              note=f"the same on a flow that sends nothing: the client is probed after 50 ms "
                   f"and its duplicate ACK names its rcv_nxt (a sniffing recipe waits forever); "
                   f"median of {len(idle)}"),
    ]


if __name__ == "__main__":
    import argparse
    from datetime import datetime

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20)
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock = datetime.now(), time.monotonic()
    table.finish(collect(args.n), args.json, table.machine(), started, time.monotonic() - clock)
