"""openai-agents, for real: a RealtimeAgent with a function tool (the `openai-agents` package,
0.24.0), in a venv of its own, `.venv-agents`, which `make install` makes (openai-agents pins
websockets below 17, which the emulator needs), running tests/emulator/agents_session.py. Its
OpenAIRealtimeWebSocketModel does not read OPENAI_BASE_URL: it connects to
`model_config["url"]`, else to api.openai.com (agents/realtime/openai_realtime.py, connect())."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ..conftest import BOOKING, HELLO, RunningEmulator
from ..test_openai_sdk import speech_24k
from .events import (
    BOOKED,
    RATE,
    Findings,
    sdk_problems,
    silence,
)

AGENTS_PYTHON = Path(__file__).resolve().parents[3] / ".venv-agents" / "bin" / "python"


def run_agent(emulator: RunningEmulator, tmp_path: Path, scenario: str,
              *extra: str) -> dict[str, Any]:
    """What agents_session.py saw of `scenario` against `emulator`."""
    assert AGENTS_PYTHON.exists(), f"no {AGENTS_PYTHON}: `make install` makes it"
    out = tmp_path / f"agents-{scenario}.json"
    done = subprocess.run(
        [str(AGENTS_PYTHON), str(Path(__file__).parents[1] / "agents_session.py"), scenario,
         emulator.env["OPENAI_BASE_URL"], str(out), *extra],
        capture_output=True, text=True, timeout=60, env={**os.environ})
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = json.loads(out.read_text())
    return got


def test_openai_agents_text_turn_and_function_call(emulator: RunningEmulator,
                                                   tmp_path: Path) -> None:
    """A RealtimeAgent answers a text turn, calls its function tool, gets the tool's output
    sent back (function_call_output and response.create, by its response sequencer) and speaks
    of it."""
    got = run_agent(emulator, tmp_path, "text")
    found = Findings()
    found.check(not got["problems"], got["problems"])
    found.check(got["calls"] == ["tomorrow at 3pm"], f"calls: {got['calls']}")
    found.check([json.loads(o) for o in got["tool_outputs"]]
                == [{"status": "booked", "slot": "tomorrow at 3pm"}], got["tool_outputs"])
    found.check(got["said"] == [["user", ["Hello there"]], ["assistant", ["You said: Hello there"]],
                                ["user", [BOOKING]], ["assistant", [BOOKED]]],
                f"history: {got['said']}")
    (call,) = got["function_calls"]
    found.check(call["name"] == "book_slot" and call["output"] and call["status"] == "completed",
                f"the call in the history: {call}")
    found.check(not sdk_problems(got["raw"]), sdk_problems(got["raw"]))
    found.done()


def test_openai_agents_audio_turn(emulator: RunningEmulator, utterances: Path,
                                  tmp_path: Path) -> None:
    """A RealtimeAgent with its default settings (audio out, semantic VAD, input
    transcription: openai_realtime.py DEFAULT_MODEL_SETTINGS) hears a spoken turn in 40 ms
    chunks (examples/realtime/cli/demo.py CHUNK_LENGTH_S) and answers in audio."""
    pcm = tmp_path / "hello.pcm"
    pcm.write_bytes(speech_24k(utterances, "hello") + silence(1.0))
    got = run_agent(emulator, tmp_path, "audio", str(pcm))
    found = Findings()
    found.check(not got["problems"], got["problems"])
    found.check(got["audio_bytes"] > RATE, "less than half a second of audio")
    found.check(got["said"] == [["user", [HELLO]], ["assistant", [f"You said: {HELLO}"]]],
                f"history: {got['said']}")
    found.check(not sdk_problems(got["raw"]), sdk_problems(got["raw"]))
    found.done()
