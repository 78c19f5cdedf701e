"""faultlab's benchmark: the lab, fault, pcap and emulator figures, each beside the tool a user
would otherwise pick, measured in the same run on the same work.

- lab set-up + teardown (netns backend), median over N builds, alternating with the same topology
  built by an `ip` CLI script (goal: at least as fast, and <= 100 ms), and `docker run --rm` of a
  minimal container on the local engine (goal: 5x faster; skipped with the reason when no engine
  answers);
- the start-up a container client costs over a namespace client (docker lab, faultlab-clients
  image, alternating; from `Lab.start` until the program runs); goal <= 400 ms at the median
- fault applied_in_ms (trigger to kernel commit), median over N applications, alternating with
  the same change made by the CLI a user would script: the fault's iptables rules as one
  `iptables` call each (drop, reject; goal 3x faster), the link down with `ip link`, the rate's
  tbf with `tc` (goal <= 15 ms for every fault); netem only where the kernel has it;
- pcap decoding and inspection of a generated 100k-packet ws:// capture, beside dpkt and scapy
  parsing the same file into the same flow walk (goals 2x and 5x, and >= 50k packets/s), and
  `faultlab pcap inspect` beside tshark listing the same WebSocket frames;
- concurrent real-time audio sessions one emulator process sustains with no chunk processed
  late (more than one 100 ms chunk behind its schedule); goal >= 50 (no peer: the service it
  emulates cannot be load-tested here)

Needs root for the lab figures; the pcap figures run anywhere. Prints each figure as it is
measured, then the table (bench/table.py); `--json FILE` writes it for bench/compare.py.
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
from datetime import datetime
from pathlib import Path

import fault_peers
import lab_peers
import table
from pcap_peers import (
    PEERS,
    decode_rate,
    dpkt_segments,
    faultlab_command,
    inspect_beside,
    missing,
    tshark_frames,
)
from table import NEEDS_ROOT, Measure, Row, alone, skipped, versus

from faultlab.capture.pcap import (
    ACK,
    PSH,
    SYN,
    build_tcp_packet,
    numbered_segments,
    write_header,
    write_record,
)
from faultlab.capture.tshark import find_tshark
from faultlab.connections import ConnectionTable
from faultlab.errors import LabError
from faultlab.events import EventBus, RunClock
from faultlab.injector import FaultRuntime
from faultlab.lab.base import Image
from faultlab.lab.docker import DockerLab
from faultlab.lab.engine import CLIENTS_IMAGE, engine_images
from faultlab.lab.netfilter import chain_name, uninstall
from faultlab.lab.netns import NetnsLab
from faultlab.profile import parse_profile
from faultlab.timeline import Due


def report(name: str, value: float, unit: str, goal: str, ok: bool) -> None:
    print(f"{name:<44} {value:>10.2f} {unit:<8} goal {goal:<10} {'ok' if ok else 'MISSED'}")


def beside(name: str, value: float, unit: str) -> None:
    """A peer's figure, printed under faultlab's."""
    print(f"{'  ' + name:<44} {value:>10.2f} {unit}")


async def bench_lab(n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        async with NetnsLab():
            pass
        times.append((time.perf_counter() - started) * 1000)
    return times


async def bench_lab_vs_ip(n: int) -> tuple[list[float], list[float], int]:
    """Lab set-up + teardown by faultlab and by the `ip` script, alternating: (faultlab ms,
    script ms, `ip` commands in the script)."""
    script = lab_peers.IpScript(os.getpid())
    ours, theirs = [], []
    try:
        for _ in range(n):
            ours += await bench_lab(1)
            theirs.append(script.once())
    finally:
        script.close()
    return ours, theirs, script.commands


async def lab_rows(n: int) -> list[Row]:
    figure = "lab set-up + teardown (median)"
    ours, theirs, commands = await bench_lab_vs_ip(n)
    med, ip_med = statistics.median(ours), statistics.median(theirs)
    report(f"lab set-up + teardown, median of {n}", med, "ms", "<= 100", med <= 100)
    print(f"{'':<44} (min {min(ours):.1f}, max {max(ours):.1f})")
    beside(f"ip CLI script ({commands} ip commands)", ip_med, "ms")
    rows = [versus(figure, Measure(med, "ms"), "ip CLI script", Measure(ip_med, "ms"), "lower",
                   at_least=1, also=med <= 100, goal="<= 100 ms",
                   note=f"faultlab: NetnsLab() entered and left (3 namespaces, 2 veth pairs, "
                        f"addresses, routes, forwarding; its lease and scratch folder); ip CLI: "
                        f"the same topology and its teardown as a sh script of {commands} `ip` "
                        f"commands; alternating, {n} each, medians")]
    image, why = lab_peers.docker_image()
    if image is None:
        print(f"  docker run --rm skipped: {why}")
        rows.append(skipped(figure, "docker run --rm", why, goal=">= 5x"))
        return rows
    k = max(n // 3, 5)
    runs = [lab_peers.docker_run(image) for _ in range(k)]
    beside(f"docker run --rm {image}, median of {k}", statistics.median(runs), "ms")
    rows.append(versus(figure, Measure(med, "ms"), "docker run --rm",
                       Measure(statistics.median(runs), "ms"), "lower", at_least=5,
                       note=f"docker: `docker run --rm --network none {image} true` on the local "
                            f"engine, until removed; median of {k}"))
    return rows


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
  - {id: rate, when: {at: 0s}, do: {fault: rate, rate_kbps: 1000, direction: to_server}}
  - {id: latency, when: {at: 0s}, do: {fault: latency, latency_ms: 20, direction: to_server}}
"""
# The faults whose applied_in_ms has a goal (the latency fault starts its queue's worker process
# and is measured only beside netem, where the kernel has it).
FAST_FAULTS = ("drop", "reject", "link_down", "rate")


async def fault_rows(n: int) -> list[Row]:
    """Each fault applied by faultlab, alternating with its peer's commands in the same lab."""
    steps = list(parse_profile(FAULTS).timeline)
    bus = EventBus(RunClock())
    rows: list[Row] = []
    async with NetnsLab() as lab:
        runtime = FaultRuntime(lab, ConnectionTable(address=str(lab.server_address)), bus, None, None,
                               steps, on_failure=print)
        no_netem = await fault_peers.netem_missing(lab)
        # step id -> (peer, its commands, the commands that undo them or None: the fault's chain)
        peers: dict[str, tuple[str, list[list[str]], list[list[str]] | None]] = {}
        for step in steps:
            if step.fault in ("drop", "reject"):
                calls = await fault_peers.iptables_calls(lab, step)
                peers[step.id] = (f"iptables x{len(calls)} calls", calls, None)
            elif step.fault == "link_down":
                peers[step.id] = ("ip link set down", fault_peers.ip_link(lab, up=False),
                                  fault_peers.ip_link(lab, up=True))
            elif step.fault == "rate":
                peers[step.id] = ("tc qdisc add tbf", *fault_peers.tc_tbf(lab, step))
            elif step.fault == "latency" and no_netem is None:
                peers[step.id] = ("tc qdisc add netem", *fault_peers.tc_netem(lab, step))
        measured = [s for s in steps if s.id in peers]
        ours: dict[str, list[float]] = {s.id: [] for s in measured}
        theirs: dict[str, list[float]] = {s.id: [] for s in measured}
        for _ in range(n):
            for step in measured:
                await runtime.apply(Due(step, 0.0, "bench"))
                ours[step.id].append(float(bus.events[-1].fields["applied_in_ms"]))
                await runtime.revert([step.id])
                _, commands, undo = peers[step.id]
                theirs[step.id].append(await fault_peers.timed(lab, commands))
                if undo is None:
                    await uninstall(lab.router, ["FORWARD"], chain_name(step.id))
                else:
                    await fault_peers.timed(lab, undo)
    for step in measured:
        peer, commands, _ = peers[step.id]
        med, peer_med = statistics.median(ours[step.id]), statistics.median(theirs[step.id])
        fast = step.fault in FAST_FAULTS
        if fast:
            report(f"fault {step.fault} applied_in_ms, median of {n}", med, "ms", "<= 15",
                   med <= 15)
        else:
            print(f"{'fault ' + step.fault + ' applied_in_ms, median of ' + str(n):<44} "
                  f"{med:>10.2f} ms")
        beside(peer, peer_med, "ms")
        what = "; ".join(" ".join(c) for c in commands)
        rows.append(versus(
            f"fault {step.fault} applied (median)", Measure(med, "ms"), peer,
            Measure(peer_med, "ms"), "lower",
            at_least=3 if step.fault in ("drop", "reject") else None,
            also=med <= 15 if fast else None, goal="<= 15 ms" if fast else "",
            note=f"{step.fault}: faultlab's applied_in_ms (trigger to kernel commit) beside the "
                 f"same change as {len(commands)} command(s) in the router namespace, "
                 f"alternating, medians of {n}: {what}"))
    if no_netem is not None:
        print(f"  tc qdisc add netem skipped: {no_netem}")
        rows.append(skipped("fault latency applied", "tc qdisc add netem",
                            f"this kernel has no netem qdisc (tc: {no_netem})",
                            note="latency: faultlab delays packets in its own userspace queue "
                                 "(NFQUEUE); netem is the kernel's way, missing here"))
    return rows


# Live API messages, as a voice session sends them (small, so each frame is one packet): the
# client's audio chunk up, masked; the model's audio down. Every frame is JSON, so the inspector
# parses each one to name its kind, as on a real capture.
UP_MESSAGE = (b'{"realtimeInput":{"audio":{"data":"' + b"A" * 40
              + b'","mimeType":"audio/pcm;rate=16000"}}}')
DOWN_MESSAGE = (b'{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"' + b"B" * 16
                + b'","mimeType":"audio/pcm;rate=24000"}}]}}}')
MASK = b"\x01\x02\x03\x04"


def make_capture(path: Path, packets: int) -> None:
    """A ws:// Live API session of `packets` packets: JSON text frames both ways (the client's
    masked), each in its own segment."""
    c, s, cs, ss = "198.18.0.2", "198.18.0.6", 1000, 9000
    masked = bytes(b ^ MASK[i % 4] for i, b in enumerate(UP_MESSAGE))
    frame = bytes([0x81, 0x80 | len(UP_MESSAGE)]) + MASK + masked
    reply = bytes([0x81, len(DOWN_MESSAGE)]) + DOWN_MESSAGE
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


WS_PORT = 8765  # the generated capture's server port


def pcap_rows(packets: int) -> list[Row]:
    """Decoding and inspection of a generated ws:// capture, beside dpkt, scapy and tshark."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.pcap"
        make_capture(path, packets)
        n, seconds = decode_rate(numbered_segments, path)
        decode = n / seconds
        peers = PEERS
        ours, walked = inspect_beside(path, {peer: numbered for peer, numbered, _, _ in peers
                                             if missing(peer) is None})
        assert ours.frames == packets - 4, f"decoded {ours.frames} WebSocket frames of {packets - 4}"
        report(f"pcap decode ({n} packets), Ethernet/IP/TCP", decode, "pkt/s", ">= 50000",
               decode >= 50000)
        report(f"pcap inspect ({ours.packets} packets), flows + WS frames", ours.rate, "pkt/s",
               ">= 50000", ours.rate >= 50000)
        decode_figure = f"pcap decode, ws:// capture ({n:,} packets)"
        inspect_figure = f"pcap inspect, ws:// capture ({ours.packets:,} packets)"
        if (why := missing("dpkt")) is not None:
            rows.append(skipped(decode_figure, "dpkt", why, goal=">= 50,000 pkt/s"))
        else:
            dn, dseconds = decode_rate(dpkt_segments, path)
            beside("dpkt, decode", dn / dseconds, "pkt/s")
            rows.append(versus(decode_figure, Measure(decode, "pkt/s"), "dpkt",
                               Measure(dn / dseconds, "pkt/s"), "higher", also=decode >= 50000,
                               goal=">= 50,000 pkt/s",
                               note="decode: every packet to a TCP segment (Ethernet/IPv4/TCP "
                                    "and its payload), nothing else: faultlab's hand decoder, "
                                    "dpkt's pcap.Reader + ethernet.Ethernet"))
        walk = ("each parses every packet to its TCP payload and feeds faultlab's flow walk "
                "(flows, per-direction counts, silences, retransmissions, reassembly, every "
                "WebSocket frame with its kind)")
        for peer, _, at_least, parse in peers:
            first = peer == "dpkt"
            if (why := missing(peer)) is not None:
                rows.append(skipped(inspect_figure, peer, why, goal=f">= {at_least:g}x"))
                continue
            theirs = walked[peer]
            beside(f"{peer}, inspect", theirs.rate, "pkt/s")
            same = theirs.frames == ours.frames and theirs.packets == ours.packets
            rows.append(versus(
                inspect_figure, Measure(ours.rate, "pkt/s"), peer, Measure(theirs.rate, "pkt/s"),
                "higher", at_least=at_least, also=same and (ours.rate >= 50000 if first else True),
                goal=">= 50,000 pkt/s" if first else "",
                note=(f"inspect in-process: faultlab's parser and {peer}'s ({parse}), "
                      f"faultlab and dpkt alternating (3 and 2 runs, means), scapy once, last; "
                      f"{walk}; "
                      f"frames {theirs.frames:,} of faultlab's {ours.frames:,}"
                      + ("" if same else " (DIFFERENT: not the same work)"))))
        command_figure = f"pcap inspect command, ws:// capture ({ours.packets:,} packets)"
        tshark = find_tshark()
        if tshark is None:
            rows.append(skipped(command_figure, "tshark", "tshark is not installed "
                                "(make install: apt-get install tshark)"))
            return rows
        cli_s, out = faultlab_command("pcap", "inspect", str(path))
        cli_frames = sum(len(f["websocket_frames"]) for f in out["flows"])
        ts = tshark_frames(tshark, path, http_port=WS_PORT)
        print(f"{'pcap inspect command (a process)':<44} {ours.packets / cli_s:>10.2f} pkt/s")
        beside("tshark, WebSocket frames listed", ts.packets / ts.seconds, "pkt/s")
        rows.append(versus(
            command_figure, Measure(ours.packets / cli_s, "pkt/s"), "tshark",
            Measure(ts.packets / ts.seconds, "pkt/s"), "higher",
            note=f"as a user runs them, each a process: `faultlab pcap inspect FILE --json` "
                 f"({cli_frames:,} frames with their kinds) and `tshark -r FILE -d "
                 f"tcp.port=={WS_PORT},http -T fields -e websocket.opcode -e "
                 f"websocket.payload_length -e websocket.payload.text`, TCP reassembly on "
                 f"({ts.frames:,} frames)"))
    return rows


LATE_S = 0.1


# Each API the emulator serves: the personality it is benched with, the variable its base URL
# comes in, the WebSocket path under it, and the kind of its audio messages in the frame log.
EMULATED = {
    "gemini": ("gemini-dev-2026-10", "GOOGLE_GEMINI_BASE_URL",
               "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
               "realtime_input.audio"),
    "openai": ("openai-realtime", "OPENAI_BASE_URL", "/realtime?model=gpt-realtime",
               "input_audio_buffer.append"),
}


def bench_emulator(protocol: str, sessions: int, seconds: float) -> tuple[float, float, float]:
    """(worst server lateness s, p99 lateness s, worst load-generator lag ms) for `sessions` of
    `protocol`."""
    personality, variable, path, audio_kind = EMULATED[protocol]
    here = Path(__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "emulator.jsonl"
        server = subprocess.Popen(
            [sys.executable, "-m", "faultlab", "emulator", "serve", "--port", "0",
             "--personality", personality, "--ca-dir", str(Path(tmp) / "ca"),
             "--events", str(events)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            env: dict[str, str] = {}
            while variable not in env:  # the base URL's variables come last
                line = server.stdout.readline()
                if not line:
                    raise RuntimeError(f"the {personality} emulator exited")
                key, _, value = line.removeprefix("export ").strip().partition("=")
                env[key] = value
            url = env[variable].replace("https", "wss") + path
            load = subprocess.run(
                [sys.executable, str(here / "emulator_load.py"), protocol, str(sessions),
                 str(seconds), url, env["SSL_CERT_FILE"]], capture_output=True, text=True,
                check=True)
            generator = json.loads(load.stdout)
        finally:
            server.terminate()
            server.wait()
        arrivals: dict[int, list[float]] = defaultdict(list)
        for line in events.read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "emulator.frame" and e.get("kind") == audio_kind:
                arrivals[e["conn"]].append(e["ts"])
    lateness = []
    for times in arrivals.values():
        # Chunk i is due 100 ms after chunk i-1: lateness against the first chunk's arrival.
        lateness += [t - times[0] - i * 0.1 for i, t in enumerate(times)]
    if not lateness:
        raise RuntimeError(f"the emulator logged no audio chunk of the {sessions} sessions")
    lateness.sort()
    return lateness[-1], lateness[int(len(lateness) * 0.99)], generator["worst_send_lag_ms"]


def emulator_rows(counts: list[int], seconds: float) -> list[Row]:
    """Per API: the most real-time audio sessions one emulator process serves with no chunk
    late (the protocol seam must cost nothing: >= 50 for each)."""
    rows = []
    for protocol in EMULATED:
        sustained = 0
        for count in counts:
            worst, p99, lag_ms = bench_emulator(protocol, count, seconds)
            ok = worst <= LATE_S
            print(f"emulator ({protocol}), {count:>3} real-time audio sessions: worst chunk "
                  f"{worst * 1000:6.1f} ms late, p99 {p99 * 1000:5.1f} ms (load generator lag "
                  f"{lag_ms} ms) {'ok' if ok else 'LATE'}")
            if ok:
                sustained = count
        name = f"emulator sessions with no chunk late, {protocol}"
        report(f"{name} (max tried)", sustained, "sessions", ">= 50", sustained >= 50)
        rows.append(alone(
            name, Measure(sustained, "sessions"), "higher", ">= 50 sessions", sustained >= 50,
            note=f"emulator ({protocol}): the most of {', '.join(map(str, counts))} concurrent "
                 f"real-time audio sessions ({seconds:g} s each) one emulator process served "
                 "with no 100 ms chunk late; no peer (the service it emulates is not "
                 "load-tested here)"))
    return rows


def container_rows(n: int) -> list[Row]:
    """The start-up a container client costs over a namespace client (the docker lab)."""
    figure = "container client's extra start-up"
    try:
        _, have = engine_images([CLIENTS_IMAGE])
    except LabError as exc:
        print(f"container client start-up skipped: {exc}")
        return [skipped(figure, None, str(exc), goal="<= 400 ms")]
    if not have[CLIENTS_IMAGE]:
        why = f"no {CLIENTS_IMAGE} image (make images)"
        print(f"container client start-up skipped: {why}")
        return [skipped(figure, None, why, goal="<= 400 ms")]
    netns, containers = asyncio.run(bench_member_start(n, CLIENTS_IMAGE))
    extra = statistics.median(containers) - statistics.median(netns)
    print(f"{'client start-up, namespace, median of ' + str(n):<44} {statistics.median(netns):>10.2f} ms")
    print(f"{'client start-up, container, median of ' + str(n):<44} "
          f"{statistics.median(containers):>10.2f} ms")
    report("container client's extra start-up", extra, "ms", "<= 400", extra <= 400)
    return [alone(figure, Measure(extra, "ms"), "lower", "<= 400 ms", extra <= 400,
                  note=f"containers: median start-up of a {CLIENTS_IMAGE} client minus a "
                       f"namespace client's, in docker labs, alternating, {n} each")]


def collect(n: int = 30, packets: int = 100_000, sessions: list[int] | None = None,
            seconds: float = 8.0) -> list[Row]:
    """Every figure of this script, printed as measured; the table's rows."""
    rows: list[Row] = []
    if os.geteuid() == 0:
        rows += asyncio.run(lab_rows(n))
        rows += container_rows(max(n // 3, 5))
        rows += asyncio.run(fault_rows(n))
    else:
        print("not root: lab and fault figures skipped")
        rows += [skipped("lab set-up + teardown (median)", "ip CLI script", NEEDS_ROOT),
                 skipped("fault drop applied", "iptables", NEEDS_ROOT)]
    rows += pcap_rows(packets)
    rows += emulator_rows(sessions or [25, 50, 75, 100], seconds)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=30, help="repetitions for the lab figures")
    parser.add_argument("--packets", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, nargs="*", default=[25, 50, 75, 100],
                        help="emulator session counts to try")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each emulator load")
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock, machine = datetime.now(), time.monotonic(), table.machine()
    print(f"faultlab benchmark ({os.cpu_count()} cores)")
    rows = collect(args.n, args.packets, args.sessions, args.seconds)
    table.finish(rows, args.json, machine, started, time.monotonic() - clock)


if __name__ == "__main__":
    main()
