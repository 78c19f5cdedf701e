"""Cassettes with the real google-genai SDK over TLS: a spoken session recorded off the emulator
(`emulator serve --record`), then served by `emulator serve --cassette` with no emulator behind
it: the same answers to a client that cuts its audio otherwise, and a client that says something
else is closed (strict) or answered by the personality (fallback)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import types

from faultlab.cassette.build import build, protocol_of
from faultlab.cassette.format import audio_path, read_cassette, write_cassette
from faultlab.cassette.tape import read_tape

from .conftest import RunningEmulator, clip, silence
from .test_sdk import (
    MODEL,
    Start,
    audio_bytes,
    booked,
    config,
    handle_of,
    say,
    stream,
    text_of,
    turn,
)

SPOKEN = {"response_modalities": ["AUDIO"], "input_audio_transcription": {},
          "output_audio_transcription": {}}


async def booking(utterances: Path, chunk_ms: int) -> dict[str, Any]:
    """Speech in `chunk_ms` chunks, the toolCall answered, the spoken confirmation."""
    client = genai.Client()
    async with client.aio.live.connect(model=MODEL, config=config(**SPOKEN)) as session:
        handle = await handle_of(session)
        await stream(session, clip("booking", utterances) + silence(1.5), chunk_ms=chunk_ms)
        first, fc, second = await booked(session)
    return {"handle": handle, "call": (fc.id, fc.name, fc.args), "text": text_of(second),
            "audio": audio_bytes(second), "kinds": [kinds(m) for m in first + second]}


def kinds(message: types.LiveServerMessage) -> str:
    return ",".join(sorted(k for k, v in message.model_dump(exclude_none=True).items() if v))


def stopped(emulator: RunningEmulator) -> None:
    emulator.process.send_signal(signal.SIGTERM)
    emulator.process.wait(timeout=5)


def events(emulator: RunningEmulator, name: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, emulator.events.read_text().splitlines())
            if e["event"] == name]


@pytest.fixture
def recorded(start_emulator: Start, utterances: Path, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A spoken booking recorded off the emulator, as a cassette; what the client got."""
    tape = tmp_path / "booking.tape.jsonl"
    emulator = start_emulator("gemini-dev-2026-10", 0.1, "--record", str(tape))
    got = asyncio.run(booking(utterances, chunk_ms=100))
    stopped(emulator)
    records = list(read_tape(tape))
    path = write_cassette(tmp_path / "booking.cassette.jsonl",
                          build(records, protocol_of(records), "target", "gemini-dev-2026-10"))
    return path, got


def test_a_recorded_session_replays_without_the_emulator(
        recorded: tuple[Path, dict[str, Any]], start_emulator: Start, utterances: Path) -> None:
    path, original = recorded
    text = path.read_text()
    # Audio sits in the side file, by reference: the cassette itself stays readable.
    assert "$audio:" in text and audio_path(path).stat().st_size > 24000 * 2
    assert max(len(line) for line in text.splitlines()) < 2000
    assert original["handle"] not in text  # the handle is a placeholder
    served = start_emulator("gemini-dev-2026-10", 0.1, "--cassette", str(path))
    # Cut in 40 ms chunks instead of 100 ms: one run of audio all the same.
    again = asyncio.run(booking(utterances, chunk_ms=40))
    assert again["kinds"] == original["kinds"]
    assert again["call"] == original["call"]
    assert again["text"] == original["text"] and "is booked" in again["text"]
    assert again["audio"] == original["audio"]
    # The handle served is the placeholder's stand-in: a UUID's shape, not the recorded one.
    assert len(again["handle"]) == 36 and again["handle"] != original["handle"]
    assert not events(served, "cassette.diverged")
    assert [e["recorded"] for e in events(served, "cassette.play")] == [1]
    # The replay writes the emulator's frame log: frame triggers follow the recorded kinds.
    logged = {e["kind"] for e in events(served, "emulator.frame") if e["from"] == "server"}
    assert {"tool_call", "setup_complete"} <= logged


async def diverging() -> tuple[str, list[types.LiveServerMessage], str | None]:
    """Text where the recording's client spoke; what came back, and how the connection ended."""
    client = genai.Client()
    async with client.aio.live.connect(model=MODEL, config=config(**SPOKEN)) as session:
        handle = await handle_of(session)
        await say(session, "Hello there")
        try:
            got = await turn(session, timeout=5)
            ended = None
        except Exception as exc:  # the SDK raises the close as an APIError
            got, ended = [], str(exc)
    return handle, got, ended


def test_a_client_that_diverges_is_closed_under_strict(
        recorded: tuple[Path, dict[str, Any]], start_emulator: Start) -> None:
    path, _ = recorded
    served = start_emulator("gemini-dev-2026-10", 0.1, "--cassette", str(path))
    _, got, ended = asyncio.run(diverging())
    assert not got and ended is not None and "1008" in ended and "cassette diverged" in ended
    (diverged,) = events(served, "cassette.diverged")
    assert diverged["received"] == "client_content"
    assert diverged["expected"].startswith("realtime_input.audio (client message 2-")
    assert diverged["then"] == "strict"


def test_a_client_that_diverges_goes_on_with_the_personality_under_fallback(
        recorded: tuple[Path, dict[str, Any]], start_emulator: Start) -> None:
    path, _ = recorded
    served = start_emulator("gemini-dev-2026-10", 0.1, "--cassette", str(path),
                            "--divergence", "fallback")
    _, got, ended = asyncio.run(diverging())
    assert ended is None
    assert "You said: Hello there" in text_of(got)
    (diverged,) = events(served, "cassette.diverged")
    assert diverged["then"] == "fallback"


def test_a_cassette_reads_back_as_written(recorded: tuple[Path, dict[str, Any]],
                                          tmp_path: Path) -> None:
    """Writing a read cassette gives the same file, byte for byte, side file included."""
    path, _ = recorded
    again = write_cassette(tmp_path / "again.cassette.jsonl", read_cassette(path))
    strip = [json.loads(line) for line in path.read_text().splitlines()]
    back = [json.loads(line) for line in again.read_text().splitlines()]
    for header in (strip[0], back[0]):
        header.pop("audio")
    assert strip == back
    assert audio_path(path).read_bytes() == audio_path(again).read_bytes()
