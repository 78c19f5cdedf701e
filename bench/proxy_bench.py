"""The proxy's cost, measured side by side in one lab: the same echo load direct, through plain
`mitmdump` in the same path, and through faultlab's proxy (mitmproxy with faultlab's addon), in
alternating rounds (goals: faultlab's proxy within 0.3 ms of plain mitmdump in added latency per
round trip and at least 90 % of its messages/s; <= 1.5 ms median added per round trip and
>= 3000 messages/s of 4.3 KB relayed).

    python bench/proxy_bench.py [--rounds 3] [--round-trips 500] [--messages 3000]
                                [--soak-minutes 0] [--json FILE]

Each path has its own echo server in the server namespace; the router REDIRECTs the mitmdump
path's port to mitmdump (`--mode transparent -q`, the run's CA as its confdir) and faultlab's to
faultlab's proxy, as a run does, so both proxies see the same connections the same way. With
--soak-minutes N it then sends 10 messages/s through faultlab's proxy for N minutes and prints its
resident memory every minute (the 30-minute soak is run by hand, not in CI).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path

import table
from table import NEEDS_ROOT, Measure, Row, skipped, versus

from faultlab.events import EventBus, RunClock
from faultlab.lab.netfilter import redirect
from faultlab.lab.netns import NetnsLab
from faultlab.lab.process import listening, terminate
from faultlab.protocols import DEFAULT
from faultlab.proxy.launch import READY_S, launch_proxy
from faultlab.tls import LabCA

HERE = Path(__file__).parent
# Each path's echo server port; the router redirects the proxies' ports to them.
PORTS = {"direct": 9000, "mitmdump": 9001, "faultlab": 9002}
MITMDUMP_PORT = 8081
SIZE = 4300


async def load(lab: NetnsLab, port: int, round_trips: int, messages: int) -> dict[str, float]:
    url = f"ws://{lab.server_address}:{port}/"
    proc = await lab.client.spawn([sys.executable, str(HERE / "proxy_load.py"), url,
                                   str(round_trips), str(messages), str(SIZE)],
                                  os.environ, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    result: dict[str, float] = json.loads(out)
    return result


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def soak(lab: NetnsLab, minutes: float) -> None:
    port = PORTS["faultlab"]
    script = (
        "import asyncio,time,sys\n"
        "from websockets.asyncio.client import connect\n"
        "async def m():\n"
        f"  async with connect('ws://{lab.server_address}:{port}/', compression=None) as ws:\n"
        f"    end=time.monotonic()+{minutes * 60}\n"
        "    while time.monotonic()<end:\n"
        f"      await ws.send('x'*{SIZE}); await ws.recv(); await asyncio.sleep(0.1)\n"
        "asyncio.run(m())\n")
    client = await lab.client.spawn([sys.executable, "-c", script], os.environ)
    # This lab's proxy: the one whose control socket is in this lab's scratch folder.
    control = str(lab.scratch / "proxy.sock").encode()
    proxy_pid = next(int(p) for p in os.listdir("/proc") if p.isdigit()
                     and b"faultlab.proxy" in (cmd := Path(f"/proc/{p}/cmdline").read_bytes())
                     and control in cmd)
    for minute in range(int(minutes) + 1):
        print(f"soak minute {minute:>3}: proxy RSS {rss_kib(proxy_pid) / 1024:7.1f} MiB", flush=True)
        if minute < int(minutes):
            await asyncio.sleep(60)
    await client.wait()


async def start_servers(lab: NetnsLab, stack: AsyncExitStack) -> None:
    for port in PORTS.values():
        server = await lab.server.spawn([sys.executable, "-m", "faultlab.peers.ws_server",
                                         "--port", str(port), "--tick", "0s"], os.environ)
        stack.push_async_callback(terminate, server, 2.0)
        while not await listening(server.pid, port):
            await asyncio.sleep(0.02)


async def start_mitmdump(lab: NetnsLab, ca: LabCA, work: Path, stack: AsyncExitStack) -> None:
    """Plain mitmdump in the router, fed the mitmdump path's connections by a REDIRECT."""
    await redirect(lab.router, lab.client_link, PORTS["mitmdump"], MITMDUMP_PORT)
    argv = [str(Path(sys.executable).with_name("mitmdump")), "--mode", "transparent",
            "--listen-host", "0.0.0.0", "--listen-port", str(MITMDUMP_PORT), "-q",
            "--set", f"confdir={ca.mitmproxy_confdir(work / 'mitmdump')}"]
    log = (work / "mitmdump.log").open("wb")
    stack.callback(log.close)
    proc = await lab.router.spawn(argv, os.environ, stdout=log, stderr=asyncio.subprocess.STDOUT)
    stack.push_async_callback(terminate, proc, 2.0)
    deadline = time.monotonic() + READY_S
    while not await listening(proc.pid, MITMDUMP_PORT):
        if proc.returncode is not None or time.monotonic() > deadline:
            raise RuntimeError(f"mitmdump did not listen on {MITMDUMP_PORT}: "
                               f"{(work / 'mitmdump.log').read_text()[-500:]}")
        await asyncio.sleep(0.02)


def summary(loads: list[dict[str, float]]) -> dict[str, float]:
    """The rounds' medians of each figure."""
    return {k: statistics.median(d[k] for d in loads) for k in loads[0]}


async def measure(rounds: int, round_trips: int, messages: int,
                  soak_minutes: float = 0) -> dict[str, dict[str, float]]:
    """Each path's round-trip median and p99 (ms) and echoes/s, the median over rounds."""
    results: dict[str, list[dict[str, float]]] = {path: [] for path in PORTS}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bus = EventBus(RunClock())
        ca = LabCA(work / "ca")
        async with NetnsLab() as lab, AsyncExitStack() as stack:
            await start_servers(lab, stack)
            await start_mitmdump(lab, ca, work, stack)
            # No capture numbers the connections here: no WebSocket waits for a number.
            await launch_proxy(lab, PORTS["faultlab"], ca, work, work / "proxy.jsonl", bus,
                               stack, upstream_ca=None, protocol=DEFAULT, numbered=False)
            for _ in range(rounds):
                for path, port in PORTS.items():
                    results[path].append(await load(lab, port, round_trips, messages))
            if soak_minutes:
                await soak(lab, soak_minutes)
    return {path: summary(loads) for path, loads in results.items()}


def rows_of(got: dict[str, dict[str, float]], rounds: int) -> list[Row]:
    direct, plain, ours = got["direct"], got["mitmdump"], got["faultlab"]
    for label, d in (("direct", direct), ("mitmdump", plain), ("faultlab proxy", ours)):
        print(f"echo round trip, {SIZE} B, {label + ':':<16} median {d['rtt_median_ms']:.3f} ms, "
              f"p99 {d['rtt_p99_ms']:.3f} ms, {d['messages_per_s']:.0f} echoes/s")
    added = ours["rtt_median_ms"] - direct["rtt_median_ms"]
    added99 = ours["rtt_p99_ms"] - direct["rtt_p99_ms"]
    plain_added = plain["rtt_median_ms"] - direct["rtt_median_ms"]
    print(f"proxy added latency: median {added:.3f} ms, p99 {added99:.3f} ms "
          f"(goal <= 1.5 ms median) {'ok' if added <= 1.5 else 'MISSED'}")
    # Each echo is two messages through the proxy: the request and the answer.
    relayed, plain_relayed = 2 * ours["messages_per_s"], 2 * plain["messages_per_s"]
    print(f"proxy throughput: {relayed:.0f} messages/s of {SIZE} B relayed "
          f"({ours['messages_per_s']:.0f} echoes/s; goal >= 3000 messages/s) "
          f"{'ok' if relayed >= 3000 else 'MISSED'}")
    print(f"plain mitmdump: added latency {plain_added:.3f} ms, {plain_relayed:.0f} messages/s")
    # faultlab's proxy is a bare mitmproxy Master with only the addons it needs, mitmdump a
    # DumpMaster: the difference is faultlab's addon less what the bare master saves.
    print(f"faultlab's proxy over plain mitmdump: {added - plain_added:+.3f} ms per round trip "
          f"(goal <= +0.3 ms), {relayed / plain_relayed:.0%} of its messages/s (goal >= 90 %)")
    how = (f"a {SIZE} B echo over ws:// from the client namespace, sequential round trips and "
           f"then pipelined messages, each path its own echo server; direct, mitmdump, faultlab "
           f"in turn, medians of {rounds} rounds")
    return [
        versus("proxy added latency per round trip (median)", Measure(added, "ms"),
               "mitmdump", Measure(plain_added, "ms"), "lower",
               also=added - plain_added <= 0.3 and added <= 1.5,
               goal="<= mitmdump + 0.3 ms, <= 1.5 ms",
               note=f"proxy latency: {how}; the round trip's median through each proxy minus "
                    f"the direct path's ({direct['rtt_median_ms']:.3f} ms); faultlab's proxy "
                    f"(a bare mitmproxy Master with faultlab's addon: frame log, fault hooks) "
                    f"{added - plain_added:+.3f} ms against mitmdump's DumpMaster"),
        versus(f"proxy messages/s relayed ({SIZE} B)", Measure(relayed, "msg/s"), "mitmdump",
               Measure(plain_relayed, "msg/s"), "higher", at_least=0.9,
               also=relayed >= 3000, goal=">= 3,000 msg/s",
               note=f"proxy throughput: {how}; messages relayed (both ways) per second; the "
                    f"direct path echoed {2 * direct['messages_per_s']:,.0f} messages/s"),
    ]


def collect(rounds: int = 3, round_trips: int = 500, messages: int = 3000,
            soak_minutes: float = 0) -> list[Row]:
    if os.geteuid() != 0:
        return [skipped("proxy added latency per round trip (median)", "mitmdump",
                        NEEDS_ROOT)]
    got = asyncio.run(measure(rounds, round_trips, messages, soak_minutes))
    return rows_of(got, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="turns of the three paths")
    parser.add_argument("--round-trips", type=int, default=500, help="per path and round")
    parser.add_argument("--messages", type=int, default=3000, help="per path and round")
    parser.add_argument("--soak-minutes", type=float, default=0)
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock, machine = datetime.now(), time.monotonic(), table.machine()
    rows = collect(args.rounds, args.round_trips, args.messages, args.soak_minutes)
    table.finish(rows, args.json, machine, started, time.monotonic() - clock)


if __name__ == "__main__":
    main()
