"""faultlab's benchmark: prints the figures the issues set goals for, measured in one run.

- lab set-up + teardown (netns backend), median over N builds; goal <= 100 ms
- the start-up a container client costs over a namespace client (docker lab, faultlab-clients
  image, alternating; from `Lab.start` until the program runs); goal <= 400 ms at the median
- fault applied_in_ms (trigger to kernel commit), median over N applications; goal <= 15 ms
- pcap decoding rate on a generated 100k-packet ws:// capture; goal >= 50k packets/s
- concurrent real-time audio sessions one emulator process sustains with no chunk processed
  late (more than one 100 ms chunk behind its schedule); goal >= 50

Needs root for the lab figures; the decoding figure runs anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from faultlab.capture.flows import analyse
from faultlab.capture.live import ConnectionTable
from faultlab.capture.pcap import ACK, PSH, SYN, build_tcp_packet, read_segments, write_header, write_record
from faultlab.errors import LabError
from faultlab.events import EventBus, RunClock
from faultlab.injector import FaultRuntime
from faultlab.lab.base import Image
from faultlab.lab.docker import DockerLab
from faultlab.lab.engine import CLIENTS_IMAGE, engine_images
from faultlab.lab.netns import NetnsLab
from faultlab.profile import parse_profile
from faultlab.timeline import Due


def report(name: str, value: float, unit: str, goal: str, ok: bool) -> None:
    print(f"{name:<44} {value:>10.2f} {unit:<8} goal {goal:<10} {'ok' if ok else 'MISSED'}")


async def bench_lab(n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        async with NetnsLab():
            pass
        times.append((time.perf_counter() - started) * 1000)
    return times


async def bench_member_start(n: int, image: str) -> tuple[list[float], list[float]]:
    """From `Lab.start` until the member's program runs, for a namespace client and a container
    client of `image`, alternating, in labs of the docker backend: (namespace ms, container ms)."""
    folder = Path(tempfile.mkdtemp(prefix="faultlab-bench-"))

    async def once(lab: DockerLab, container: Image | None) -> float:
        mark = folder / f"ran-{time.perf_counter_ns()}"
        started = time.perf_counter()
        member = await lab.start("client", ["sh", "-c", f"echo > {mark}"], {}, None,
                                 folder / "log", container)
        while not mark.exists():
            await asyncio.sleep(0.001)
        elapsed = (time.perf_counter() - started) * 1000
        await member.wait()
        return elapsed

    netns, containers = [], []
    try:
        for _ in range(n):
            async with DockerLab() as lab:
                netns.append(await once(lab, None))
            async with DockerLab() as lab:
                containers.append(await once(lab, Image(image, (folder,))))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return netns, containers


FAULTS = """\
name: bench
client: {command: [sleep, "1"]}
timeline:
  - {id: drop, when: {at: 0s}, do: {fault: drop}}
  - {id: reject, when: {at: 0s}, do: {fault: reject}}
  - {id: linkdown, when: {at: 0s}, do: {fault: link_down}}
"""


async def bench_faults(n: int) -> dict[str, list[float]]:
    steps = parse_profile(FAULTS).timeline
    out: dict[str, list[float]] = {s.fault: [] for s in steps}
    bus = EventBus(RunClock())
    async with NetnsLab() as lab:
        runtime = FaultRuntime(lab, ConnectionTable(str(lab.server_address)), bus, None, None, steps,
                               on_failure=print)
        for _ in range(n):
            for step in steps:
                await runtime.apply(Due(step, 0.0, "bench"))
                out[step.fault].append(float(bus.events[-1].fields["applied_in_ms"]))
                await runtime.revert([step.id])
    return out


def make_capture(path: Path, packets: int) -> None:
    """A ws:// session of `packets` packets: text frames both ways with ACKs between them."""
    c, s, cs, ss = "198.18.0.2", "198.18.0.6", 1000, 9000
    frame = bytes([0x81, 0x80 | 100]) + b"\x01\x02\x03\x04" + b"x" * 100
    reply = bytes([0x81, 100]) + b"y" * 100
    with path.open("wb") as f:
        write_header(f)
        t = 1_700_000_000.0
        get = b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"
        ok = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
        write_record(f, t, build_tcp_packet(c, 40000, s, 8765, cs - 1, 0, SYN))
        write_record(f, t, build_tcp_packet(s, 8765, c, 40000, ss - 1, cs, SYN | ACK))
        write_record(f, t, build_tcp_packet(c, 40000, s, 8765, cs, ss, PSH | ACK, get))
        write_record(f, t, build_tcp_packet(s, 8765, c, 40000, ss, cs + len(get), PSH | ACK, ok))
        cs, ss = cs + len(get), ss + len(ok)
        for i in range(packets - 4):
            t += 0.0005
            if i % 2 == 0:
                write_record(f, t, build_tcp_packet(c, 40000, s, 8765, cs, ss, PSH | ACK, frame))
                cs += len(frame)
            else:
                write_record(f, t, build_tcp_packet(s, 8765, c, 40000, ss, cs, PSH | ACK, reply))
                ss += len(reply)


def bench_decode(packets: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.pcap"
        make_capture(path, packets)
        started = time.perf_counter()
        n = sum(1 for _ in read_segments(path))
        decode_rate = n / (time.perf_counter() - started)
        started = time.perf_counter()
        result = analyse(path)
        inspect_rate = result.packets / (time.perf_counter() - started)
        frames = sum(len(flow.frames) for flow in result.flows)
        assert frames == packets - 4, f"decoded {frames} WebSocket frames of {packets - 4}"
        return decode_rate, inspect_rate, result.packets


LATE_S = 0.1


def bench_emulator(sessions: int, seconds: float) -> tuple[float, float, float]:
    """(worst server lateness s, p99 lateness s, worst load-generator lag ms) for `sessions`."""
    here = Path(__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "emulator.jsonl"
        server = subprocess.Popen(
            [sys.executable, "-m", "faultlab", "emulator", "serve", "--port", "0",
             "--ca-dir", str(Path(tmp) / "ca"), "--events", str(events)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            env = dict(line.removeprefix("export ").strip().split("=", 1)
                       for line in (server.stdout.readline() for _ in range(5)))
            url = (env["GOOGLE_GEMINI_BASE_URL"].replace("https", "wss")
                   + "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent")
            load = subprocess.run(
                [sys.executable, str(here / "emulator_load.py"), str(sessions), str(seconds), url,
                 env["SSL_CERT_FILE"]], capture_output=True, text=True, check=True)
            generator = json.loads(load.stdout)
        finally:
            server.terminate()
            server.wait()
        arrivals: dict[int, list[float]] = defaultdict(list)
        for line in events.read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "emulator.frame" and e.get("kind") == "realtime_input":
                arrivals[e["conn"]].append(e["ts"])
    lateness = []
    for times in arrivals.values():
        # Chunk i is due 100 ms after chunk i-1: lateness against the first chunk's arrival.
        lateness += [t - times[0] - i * 0.1 for i, t in enumerate(times)]
    lateness.sort()
    return lateness[-1], lateness[int(len(lateness) * 0.99)], generator["worst_send_lag_ms"]


def bench_containers(n: int) -> None:
    """The start-up a container client costs over a namespace client (the docker lab)."""
    try:
        _, have = engine_images([CLIENTS_IMAGE])
    except LabError as exc:
        print(f"container client start-up skipped: {exc}")
        return
    if not have[CLIENTS_IMAGE]:
        print(f"container client start-up skipped: no {CLIENTS_IMAGE} image (make images)")
        return
    netns, containers = asyncio.run(bench_member_start(n, CLIENTS_IMAGE))
    extra = statistics.median(containers) - statistics.median(netns)
    print(f"{'client start-up, namespace, median of ' + str(n):<44} {statistics.median(netns):>10.2f} ms")
    print(f"{'client start-up, container, median of ' + str(n):<44} "
          f"{statistics.median(containers):>10.2f} ms")
    report("container client's extra start-up", extra, "ms", "<= 400", extra <= 400)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=30, help="repetitions for the lab figures")
    parser.add_argument("--packets", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, nargs="*", default=[25, 50, 75, 100],
                        help="emulator session counts to try")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each emulator load")
    args = parser.parse_args()
    print(f"faultlab benchmark ({os.cpu_count()} cores)")
    if os.geteuid() == 0:
        lab = asyncio.run(bench_lab(args.n))
        med = statistics.median(lab)
        report(f"lab set-up + teardown, median of {args.n}", med, "ms", "<= 100", med <= 100)
        print(f"{'':<44} (min {min(lab):.1f}, max {max(lab):.1f})")
        bench_containers(max(args.n // 3, 5))
        faults = asyncio.run(bench_faults(args.n))
        for name, values in faults.items():
            med = statistics.median(values)
            report(f"fault {name} applied_in_ms, median of {args.n}", med, "ms", "<= 15", med <= 15)
    else:
        print("not root: lab and fault figures skipped")
    decode, inspect, n = bench_decode(args.packets)
    report(f"pcap decode ({n} packets), Ethernet/IP/TCP", decode, "pkt/s", ">= 50000", decode >= 50000)
    report(f"pcap inspect ({n} packets), flows + WS frames", inspect, "pkt/s", ">= 50000",
           inspect >= 50000)
    sustained = 0
    for count in args.sessions:
        worst, p99, lag_ms = bench_emulator(count, args.seconds)
        ok = worst <= LATE_S
        print(f"emulator, {count:>3} real-time audio sessions: worst chunk {worst * 1000:6.1f} ms "
              f"late, p99 {p99 * 1000:5.1f} ms (load generator lag {lag_ms} ms)"
              f" {'ok' if ok else 'LATE'}")
        if ok:
            sustained = count
    report("emulator sessions with no chunk late (max tried)", sustained, "sessions", ">= 50",
           sustained >= 50)


if __name__ == "__main__":
    main()
