"""WebRTC's figures: the real-time WebRTC calls one emulator process serves with no audio chunk
late (goal >= 20), and the one-way latency the lab adds to an RTP-sized datagram at 0 ms of
impairment (goal < 5 ms), through the impairment engine (a `path` step of `latency_ms: 0`, which
puts NFQUEUE's queue in the path) and without it.

Each figure is a faultlab run in a netns lab (aiortc offers no loopback candidates, so the calls
need a path between two namespaces): the calls come from one load process in the client
namespace (bench/webrtc_peers.py `calls`), each an aiortc peer connection sending its
microphone's 20 ms Opus packets (silence, encoded once) in real time to the emulator (OpenAI
Realtime), whose frame log
says when each 100 ms of a call's audio reached its core. The latency: round trips of a datagram
every 20 ms to an echo in the server namespace, the lab's median beside the same on the host's
loopback, halved.

Needs root. `make bench`'s part `webrtc` (alone: `python bench/all.py --only webrtc`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from table import Measure, Row, alone, print_beside, print_figure
from webrtc_peers import RTP_BYTES, ping

from faultlab.profile import load_profile
from faultlab.runner import Run

HERE = Path(__file__).resolve().parent
PEERS = HERE / "webrtc_peers.py"
# Late: more than one 100 ms chunk behind its schedule (as emulator_bench.py).
LATE_S = 0.1
APPEND_KIND = "input_audio_buffer.append"
ECHO_PORT = 5004
PING_S = 5.0


def _run(folder: Path, name: str, profile: str) -> Path:
    """A profile's run in `folder`; its run folder (raises unless it passed)."""
    path = folder / f"{name}.yaml"
    path.write_text(profile)
    result = asyncio.run(Run(load_profile(path), folder / "runs").execute())
    if result.verdict != "PASS":
        raise RuntimeError(f"{name}: {result.verdict} {result.error or ''} ({result.run_dir})")
    return result.run_dir


def _calls_profile(count: int, seconds: float) -> str:
    return f"""
name: bench-webrtc-{count}-calls
target:
  emulator: {{personality: openai-realtime}}
client:
  command: [{sys.executable}, {PEERS}, calls, "{count}", "{seconds}", load.json]
  env: {{OPENAI_API_KEY: not-a-real-key}}
expect: [{{exit_code: 0}}]
timeout: {seconds + 30 + count}s
"""


def behind(chunks: list[tuple[float, float]]) -> list[float]:
    """How far behind its schedule each of a call's chunks (arrival t, audio s) reached the
    core: the audio up to its end is due in real time from the call's start, which is put at its
    earliest chunk relative to its schedule (not its first: that one may be the late one).
    A lower bound: a call whose every chunk came equally late reads as on time (its lag is
    in its start, which the core cannot tell from a call begun later); the load's own send lag
    (webrtc_peers' worst_send_lag_ms) is reported beside it for that reason."""
    due = list(itertools.accumulate(audio_s for _, audio_s in chunks))
    offsets = [t - d for (t, _), d in zip(chunks, due, strict=True)]
    start = min(offsets, default=0.0)
    return [o - start for o in offsets]


def lateness(folder: Path, count: int, seconds: float) -> tuple[float, int, float]:
    """(worst chunk lateness s, calls whose audio reached the core, the load's worst send lag
    ms) for `count` concurrent calls."""
    run_dir = _run(folder, f"calls-{count}", _calls_profile(count, seconds))
    arrivals: dict[object, list[tuple[float, float]]] = defaultdict(list)
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "emulator.frame" and e.get("kind") == APPEND_KIND:
            arrivals[e["conn"]].append((e["t"], float(e["audio_s"])))
    late = [x for chunks in arrivals.values() for x in behind(chunks)]
    load = json.loads((run_dir / "load.json").read_text())
    return max(late, default=float("inf")), len(arrivals), float(load["worst_send_lag_ms"])


def _latency_profile(engine: bool) -> str:
    steps = "".join(f"""
  - id: engine-{direction}
    when: {{at: 0s}}
    do: {{fault: path, direction: {direction}, latency_ms: 0}}""" for direction in (
        "to_server", "to_client")) if engine else " []"
    return f"""
name: bench-lab-latency{'-engine' if engine else ''}
target: {{command: [{sys.executable}, {PEERS}, echo, "{ECHO_PORT}"], port: {ECHO_PORT}}}
client: {{command: [{sys.executable}, {PEERS}, ping, "{PING_S}", rtts.json]}}
timeline:{steps}
expect: [{{exit_code: 0}}]
timeout: {PING_S + 20}s
"""


def lab_rtt(folder: Path, engine: bool) -> list[float]:
    run_dir = _run(folder, f"latency{'-engine' if engine else ''}", _latency_profile(engine))
    return list(json.loads((run_dir / "rtts.json").read_text()))


def loopback_rtt(folder: Path) -> list[float]:
    """The same round trips on the host's loopback (no lab)."""
    echo = subprocess.Popen([sys.executable, str(PEERS), "echo", str(ECHO_PORT + 1)])
    try:
        time.sleep(1.0)  # its import and bind
        out = folder / "loopback.json"
        ping("127.0.0.1", ECHO_PORT + 1, PING_S, out)
        return list(json.loads(out.read_text()))
    finally:
        echo.terminate()
        echo.wait()


def collect(counts: Sequence[int] = (10, 20, 30), seconds: float = 8.0) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="faultlab-bench-") as tmp:
        folder = Path(tmp)
        sustained = 0
        tried = []
        for count in counts:
            worst, reached, lag_ms = lateness(folder, count, seconds)
            ok = worst <= LATE_S and reached == count
            print(f"emulator (WebRTC), {count:>3} real-time calls: {reached} reached the core, "
                  f"worst chunk {worst * 1000:6.1f} ms late (load's worst send lag {lag_ms} ms) "
                  f"{'ok' if ok else 'LATE'}", flush=True)
            tried.append(f"{count}: {worst * 1000:.0f} ms late, the load's lag {lag_ms:.0f} ms")
            if ok:
                sustained = count
        figure = "emulator WebRTC calls with no chunk late"
        print_figure(f"{figure} (max tried)", sustained, "calls", ">= 20", sustained >= 20)
        rows.append(alone(
            figure, Measure(sustained, "calls"), "higher", ">= 20 calls", sustained >= 20,
            note=f"webrtc: the most of {', '.join(map(str, counts))} concurrent aiortc calls "
                 f"({seconds:g} s of real-time Opus audio each, pre-encoded silence, from one "
                 "load process in the lab's client namespace) one emulator process (OpenAI "
                 "Realtime) took in with no 100 ms chunk more than 100 ms late (worst chunk, "
                 "and the load process's own worst lag in handing a packet over, which shares "
                 "the cores: " + "; ".join(tried) + "); no "
                 "peer (the service is not load-tested here)"))

        loop = statistics.median(loopback_rtt(folder))
        print_beside("host loopback round trip (median)", loop * 1000, "ms")
        for engine in (False, True):
            rtts = lab_rtt(folder, engine)
            added = (statistics.median(rtts) - loop) / 2
            p99 = (sorted(rtts)[int(len(rtts) * 0.99)] - loop) / 2
            how = "through the impairment engine at 0 ms" if engine else "no impairment"
            figure = f"lab's added one-way latency, {how}"
            print_figure(f"{figure} (median)", added * 1000, "ms", "< 5", added < 0.005)
            rows.append(alone(
                figure, Measure(added * 1000, "ms"), "lower", "< 5 ms", added < 0.005,
                note=f"webrtc: half the median round trip of {len(rtts)} {RTP_BYTES}-byte "
                     f"datagrams, one every 20 ms, client namespace to an echo in the server "
                     f"namespace, less "
                     f"the same on the host's loopback ({loop * 1000:.3f} ms); p99 "
                     f"{p99 * 1000:.2f} ms" + ("; a `path` step of latency_ms: 0 each way "
                                               "(NFQUEUE's queue in the path)" if engine else "")))
    return rows


if __name__ == "__main__":
    for row in collect():
        print(row)
