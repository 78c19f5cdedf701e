"""The audio keep-alive's key: the source's arrival (right) or the uplink's sends (the mistake of
docs/live-server-behaviour.md §8.10), against a session whose sends are held back for a while, as a
congested uplink holds them. A fake session: this is the keep-alive's logic, not the network."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from faultlab.clients.uplink import FRAME_BYTES, KeepAlive, Uplink
from faultlab.events import EventWriter

SPEECH = b"\x01\x02" * (FRAME_BYTES // 2)  # a 100 ms frame that is not silence
HELD_S = 0.8


class HeldSession:
    """Takes audio frames, but holds the sends made between 0.5 s and 0.5 s + HELD_S."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.started = time.monotonic()

    async def send(self, pcm: bytes) -> None:
        held_until = self.started + 0.5 + HELD_S
        if 0.5 <= time.monotonic() - self.started < HELD_S + 0.5:
            await asyncio.sleep(held_until - time.monotonic())
        self.frames.append(pcm)


class Speaker:
    """The client side the uplink sends through (faultlab.clients.uplink.Speaker)."""

    def __init__(self) -> None:
        self.up = asyncio.Event()
        self.up.set()
        self.session = HeldSession()

    async def send_audio(self, pcm: bytes) -> None:
        await self.session.send(pcm)

    async def end_audio(self) -> None:
        pass


async def speak(path: Path, seconds: float) -> None:
    """A microphone handing over speech at real-time rate for `seconds`, then EOF; 300 ms
    ahead, so that a loaded machine's late wake-ups never make it look stalled."""
    async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        start = time.monotonic() - 0.3
        for n in range(round(seconds / 0.1)):
            await asyncio.sleep(max(0.0, start + n * 0.1 - time.monotonic()))
            writer.write(SPEECH)
            await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(serve, str(path))
    await asyncio.sleep(seconds + 1)
    server.close()


def silent_frames_between_speech(keep_alive: KeepAlive, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> int:
    mic = tmp_path / "mic.sock"
    monkeypatch.setenv("FAULTLAB_MIC", str(mic))
    speaker = Speaker()
    uplink = Uplink(speaker, keep_alive, False, EventWriter(os.devnull))

    async def scenario() -> None:
        server = asyncio.create_task(speak(mic, 2.5))
        await asyncio.sleep(0.1)
        await uplink.run()
        await server

    asyncio.run(scenario())
    frames = speaker.session.frames
    spoken = [i for i, f in enumerate(frames) if f.strip(b"\x00")]
    return sum(1 for f in frames[spoken[0]:spoken[-1]] if not f.strip(b"\x00"))


def test_keyed_on_the_source_a_held_uplink_gets_no_silence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The source never stalled: whatever the uplink's pace, no silence goes into the speech."""
    assert silent_frames_between_speech("source", tmp_path, monkeypatch) == 0


def test_keyed_on_the_uplink_a_held_uplink_gets_silence_in_its_speech(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keyed on its own sends, the keep-alive takes the held-back uplink for a stalled source
    and queues silence behind speech that was only late: the server hears a pause that the
    user never made."""
    assert silent_frames_between_speech("uplink", tmp_path, monkeypatch) >= 3


def test_a_send_that_fails_otherwise_than_by_the_connection_is_said(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch
                                                                      ) -> None:
    """A client hook that raises (a bug, not a lost connection) leaves one uplink.error; the
    frames count as lost."""
    mic = tmp_path / "mic.sock"
    monkeypatch.setenv("FAULTLAB_MIC", str(mic))
    events = tmp_path / "events.jsonl"

    class Broken(Speaker):
        async def send_audio(self, pcm: bytes) -> None:
            raise TypeError("no such argument")

    writer = EventWriter(events)
    uplink = Uplink(Broken(), None, False, writer)

    async def scenario() -> None:
        server = asyncio.create_task(speak(mic, 0.5))
        await asyncio.sleep(0.1)
        await uplink.run()
        await server

    asyncio.run(scenario())
    writer.close()
    errors = [line for line in events.read_text().splitlines() if '"uplink.error"' in line]
    assert len(errors) == 1 and "TypeError: no such argument" in errors[0]
    assert uplink.lost_bytes > 0 and uplink.sent_bytes == 0
