"""Concurrent real-time audio sessions one emulator process sustains, per API it serves, with no
chunk processed late (more than one 100 ms chunk behind its schedule); goal >= 50. No peer: the
service it emulates cannot be load-tested here. The load comes from emulator_load.py, a process
of its own.

Runs anywhere (no lab). `make bench`'s part `emulator` (alone: `python bench/all.py --only
emulator`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from table import Measure, Row, alone, print_figure

# Late: more than one 100 ms chunk behind its schedule.
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


def lateness(protocol: str, sessions: int, seconds: float) -> tuple[float, float, float]:
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
    late: list[float] = []
    for times in arrivals.values():
        # Chunk i is due 100 ms after chunk i-1: lateness against the first chunk's arrival.
        late += [t - times[0] - i * 0.1 for i, t in enumerate(times)]
    if not late:
        raise RuntimeError(f"the emulator logged no audio chunk of the {sessions} sessions")
    late.sort()
    return late[-1], late[int(len(late) * 0.99)], float(generator["worst_send_lag_ms"])


def collect(counts: Sequence[int] = (25, 50, 75, 100), seconds: float = 8.0) -> list[Row]:
    """Per API: the most real-time audio sessions one emulator process serves with no chunk
    late (the protocol seam must cost nothing: >= 50 for each)."""
    rows = []
    for protocol in EMULATED:
        sustained = 0
        for count in counts:
            worst, p99, lag_ms = lateness(protocol, count, seconds)
            ok = worst <= LATE_S
            print(f"emulator ({protocol}), {count:>3} real-time audio sessions: worst chunk "
                  f"{worst * 1000:6.1f} ms late, p99 {p99 * 1000:5.1f} ms (load generator lag "
                  f"{lag_ms} ms) {'ok' if ok else 'LATE'}")
            if ok:
                sustained = count
        name = f"emulator sessions with no chunk late, {protocol}"
        print_figure(f"{name} (max tried)", sustained, "sessions", ">= 50", sustained >= 50)
        rows.append(alone(
            name, Measure(sustained, "sessions"), "higher", ">= 50 sessions", sustained >= 50,
            note=f"emulator ({protocol}): the most of {', '.join(map(str, counts))} concurrent "
                 f"real-time audio sessions ({seconds:g} s each) one emulator process served "
                 "with no 100 ms chunk late; no peer (the service it emulates is not "
                 "load-tested here)"))
    return rows
