"""The proxy's cost, measured side by side in one lab: the same echo load direct, then through
mitmproxy (goals: <= 1.5 ms median added per round trip, >= 3000 messages/s of 4.3 KB).

    python bench/proxy_bench.py [--round-trips 1000] [--messages 5000] [--soak-minutes 0]

With --soak-minutes N it then sends 10 messages/s through the proxy for N minutes and prints the
proxy's resident memory every minute (the 30-minute soak is run by hand, not in CI).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

from faultlab.events import EventBus, RunClock
from faultlab.lab.netns import NetnsLab
from faultlab.lab.process import listening, terminate
from faultlab.proxy.launch import launch_proxy
from faultlab.tls import LabCA

HERE = Path(__file__).parent
PORT = 9000
SIZE = 4300


async def load(lab: NetnsLab, args: argparse.Namespace) -> dict[str, float]:
    url = f"ws://{lab.server_address}:{PORT}/"
    proc = await lab.client.spawn([sys.executable, str(HERE / "proxy_load.py"), url,
                                   str(args.round_trips), str(args.messages), str(SIZE)],
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
    script = (
        "import asyncio,time,sys\n"
        "from websockets.asyncio.client import connect\n"
        "async def m():\n"
        f"  async with connect('ws://{lab.server_address}:{PORT}/', compression=None) as ws:\n"
        f"    end=time.monotonic()+{minutes * 60}\n"
        "    while time.monotonic()<end:\n"
        f"      await ws.send('x'*{SIZE}); await ws.recv(); await asyncio.sleep(0.1)\n"
        "asyncio.run(m())\n")
    client = await lab.client.spawn([sys.executable, "-c", script], os.environ)
    proxy_pid = next(int(p) for p in os.listdir("/proc") if p.isdigit()
                     and b"faultlab.proxy" in Path(f"/proc/{p}/cmdline").read_bytes())
    for minute in range(int(minutes) + 1):
        print(f"soak minute {minute:>3}: proxy RSS {rss_kib(proxy_pid) / 1024:7.1f} MiB", flush=True)
        if minute < int(minutes):
            await asyncio.sleep(60)
    await client.wait()


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bus = EventBus(RunClock())
        async with NetnsLab() as lab, AsyncExitStack() as stack:
            server = await lab.server.spawn([sys.executable, "-m", "faultlab.peers.ws_server",
                                             "--port", str(PORT), "--tick", "0s"], os.environ)
            stack.push_async_callback(terminate, server, 2.0)
            while not listening(server.pid, PORT):
                await asyncio.sleep(0.02)
            direct = await load(lab, args)
            await launch_proxy(lab, PORT, LabCA(work / "ca"), work, work / "proxy.jsonl", bus,
                               stack, upstream_ca=None)
            proxied = await load(lab, args)
            added = proxied["rtt_median_ms"] - direct["rtt_median_ms"]
            added99 = proxied["rtt_p99_ms"] - direct["rtt_p99_ms"]
            print(f"echo round trip, {SIZE} B, direct:   median {direct['rtt_median_ms']:.3f} ms, "
                  f"p99 {direct['rtt_p99_ms']:.3f} ms, {direct['messages_per_s']:.0f} msg/s")
            print(f"echo round trip, {SIZE} B, proxied:  median {proxied['rtt_median_ms']:.3f} ms, "
                  f"p99 {proxied['rtt_p99_ms']:.3f} ms, {proxied['messages_per_s']:.0f} msg/s")
            print(f"proxy added latency: median {added:.3f} ms, p99 {added99:.3f} ms "
                  f"(goal <= 1.5 ms median) {'ok' if added <= 1.5 else 'MISSED'}")
            # Each echo is two messages through the proxy: the request and the answer.
            relayed = 2 * proxied["messages_per_s"]
            print(f"proxy throughput: {relayed:.0f} messages/s of {SIZE} B relayed "
                  f"({proxied['messages_per_s']:.0f} echoes/s; goal >= 3000 messages/s) "
                  f"{'ok' if relayed >= 3000 else 'MISSED'}")
            if args.soak_minutes:
                await soak(lab, args.soak_minutes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--round-trips", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--soak-minutes", type=float, default=0)
    asyncio.run(main(parser.parse_args()))
