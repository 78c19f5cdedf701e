"""The reference clients, run as a user runs them (their module, env vars only), with the real
google-genai SDK against a real emulator on loopback. Their recovery from faults is tested in the
lab by the field profiles (tests/lab/test_field.py); here: the healthy path, the event file, the
exit codes, the ledger, and the microphone path."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from faultlab.events import Event, EventBus, RunClock
from faultlab.mic import VirtualMic
from faultlab.peers import BUILTINS
from faultlab.scenarios.booking.expectations import user_told
from faultlab.speech import write_clips

from ..conftest import REPO
from ..emulator.conftest import RunningEmulator

Start = Callable[..., RunningEmulator]
NATIVE = "gemini-live-2.5-flash-native-audio"


def run_client(name: str, tmp_path: Path, *args: str,
               env: dict[str, str] | None = None) -> tuple[int, list[Event]]:
    events = tmp_path / f"{name}.events.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", BUILTINS[name], "--time-scale", "0.1", *args],
        env={**os.environ, "FAULTLAB_EVENTS": str(events), "FAULTLAB_RUN_DIR": str(tmp_path),
             **(env or {})},
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, [written(line) for line in events.read_text().splitlines()]


def written(line: str) -> Event:
    """An event as a client writes it to FAULTLAB_EVENTS (unix time in `ts`)."""
    data = json.loads(line)
    return Event(float(data.pop("ts")), "client", str(data.pop("event")), data)


def names(events: list[Event]) -> list[str]:
    return [e.name for e in events]


@pytest.mark.parametrize("name", ["naive", "field-recovery", "racing-recovery"])
def test_each_client_books_answers_the_call_and_tells_the_truth(
        start_emulator: Start, tmp_path: Path, name: str) -> None:
    """On a healthy path every client asks for the booking, answers the call by its id when the
    backend commits, asks, gets a truthful answer and exits 0; the ledger holds one booking."""
    start_emulator()
    code, events = run_client(name, tmp_path)
    assert code == 0
    assert_booked_and_told(events, tmp_path)


def assert_booked_and_told(events: list[Event], run_dir: Path) -> None:
    """A healthy booking conversation: the call handed to the backend, answered by its id once
    committed, then the question, answered truthfully; nothing lost; one booking in the ledger."""
    seen = names(events)
    for expected in ("client.connected", "client.tool_call", "backend.job", "backend.commit",
                     "client.tool_response", "client.ask", "client.answer"):
        assert expected in seen, expected
    assert seen.index("backend.commit") < seen.index("client.tool_response") < seen.index(
        "client.ask")
    call = next(e for e in events if e.name == "client.tool_call")
    assert next(e for e in events if e.name == "client.tool_response").fields["id"] == call.fields["id"]
    assert user_told(events)[0] == "truth"
    assert "client.lost" not in seen and "resume.attempt" not in seen
    ledger = json.loads((run_dir / "ledger.json").read_text())["bookings"]
    assert [(b["slot"], b["status"]) for b in ledger] == [("tomorrow at 3pm", "committed")]


def test_never_answering_the_call_leaves_the_model_in_progress(start_emulator: Start,
                                                               tmp_path: Path) -> None:
    """--no-answer (field R2): the backend commits, the model still says it is booking."""
    start_emulator()
    code, events = run_client("naive", tmp_path, "--no-answer")
    assert code == 0
    assert "client.tool_response" not in names(events)
    verdict, seen, _ = user_told(events)
    assert verdict == "untrue" and "in progress" in seen


def test_spoken_replies_come_with_a_transcript_and_audio_events(start_emulator: Start,
                                                                tmp_path: Path) -> None:
    """--audio: the answer is the transcript of spoken audio; each spoken turn has an
    audio_start and an audio_end with its length."""
    start_emulator()
    code, events = run_client("naive", tmp_path, "--audio")
    assert code == 0
    ends = [e for e in events if e.name == "client.audio_end"]
    assert len(ends) == 2 and all(e.fields["audio_s"] > 0.5 for e in ends)  # done, then answer
    assert names(events).count("client.audio_start") == 2
    assert user_told(events)[0] == "truth"


def test_a_refused_first_connection_exits_2(start_emulator: Start, tmp_path: Path) -> None:
    """A setup the server refuses (TEXT replies from a native-audio model: 1007, S4) is an
    event and exit code 2."""
    start_emulator()
    code, events = run_client("naive", tmp_path, "--model", NATIVE)
    assert code == 2
    refused = next(e for e in events if e.name == "client.refused")
    assert refused.fields["code"] == 1007


def test_an_unreachable_service_exits_2(tmp_path: Path) -> None:
    """Nothing listening: client.refused with the socket's error, exit 2, no traceback."""
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        unused_tcp_port = probe.getsockname()[1]
    code, events = run_client("naive", tmp_path, env={
        "GOOGLE_API_KEY": "test-key-not-a-secret",
        "GOOGLE_GEMINI_BASE_URL": f"https://127.0.0.1:{unused_tcp_port}"})
    assert code == 2
    refused = next(e for e in events if e.name == "client.refused")
    assert refused.fields["code"] is None and "ConnectionRefusedError" in refused.fields["reason"]


@pytest.mark.parametrize("keep_alive", [True, False])
def test_speaking_through_the_lab_microphone(start_emulator: Start, tmp_path: Path,
                                             keep_alive: bool) -> None:
    """--mic: the client streams the virtual microphone in 100 ms frames; the emulator hears the
    registered utterance and replies. With the microphone stalled for 2 s, the keep-alive sends
    the pause as silence (uplink.keep_alive); without it nothing goes out while it stalls."""
    speech = tmp_path / "speech"
    line = "Hello, I would like to know when the station office opens tomorrow morning."
    clips = write_clips([line], speech)
    start_emulator("vertex-2026", 1.0, "--utterances", str(speech))
    emulator_events = tmp_path / "emulator-0.jsonl"

    async def scenario() -> tuple[int, list[Event]]:
        bus = EventBus(RunClock())
        mic = VirtualMic([line], clips, 0.5, None, bus)
        mic_path = await mic.serve(tmp_path)
        args = ["--mic", "--ask", "", "--model", NATIVE, "--duration", "15s"]
        if not keep_alive:
            args.append("--no-keep-alive")
        client = asyncio.create_task(asyncio.to_thread(
            run_client, "naive", tmp_path, *args, env={"FAULTLAB_MIC": str(mic_path)}))
        while not any(e.name == "mic.utterance" for e in bus.events):
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        mic.stall(2.0)
        code, events = await client
        await mic.close()
        return code, events

    code, events = asyncio.run(scenario())
    assert code == 0
    assert ("uplink.keep_alive" in names(events)) is keep_alive
    frames = [json.loads(x) for x in emulator_events.read_text().splitlines()]
    audio = [f for f in frames if f["event"] == "emulator.frame" and f.get("audio_s")
             and f["from"] == "client"]
    assert audio and all(abs(f["audio_s"] - 0.1) < 1e-6 for f in audio[:-1])  # coalesced to 100 ms
    gaps = [b["ts"] - a["ts"] for a, b in itertools.pairwise(audio)]
    assert (max(gaps) > 1.5) is not keep_alive  # without the keep-alive, the stall is a hole
    assert any(f["event"] == "emulator.heard" for f in frames)
    assert "client.answer" in names(events)
