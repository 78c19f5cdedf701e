"""The clients' audio path: the lab's microphone to the session, with an audio keep-alive.

The microphone (`FAULTLAB_MIC`, a unix socket the lab serves) hands over 16 kHz 16-bit mono PCM
at real-time rate and ends with EOF. The uplink coalesces it into 100 ms `realtimeInput.audio`
messages. The server's VAD ends a turn only on silence that arrives as samples at real-time rate
(live-server-behaviour.md A1-A3), so a source that stalls (a browser handing empty buffers) would
leave the turn hanging: the keep-alive fills such pauses with silent samples. It is keyed on the
source's arrival, not on the uplink's sends (a bursty sender would look stalled, §8.10): whenever
the source is more than 200 ms behind the wall clock since it started, the gap is sent as silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any, Protocol

from faultlab.events import EventWriter

RATE = 16000
SAMPLE_BYTES = 2
FRAME_S = 0.1
FRAME_BYTES = int(RATE * FRAME_S) * SAMPLE_BYTES
# How far the source may fall behind real time before the keep-alive speaks for it: one frame's
# worth of slack over the 100 ms coalescing, so an on-time source never gets silence mixed in.
KEEP_ALIVE_LAG_S = 0.2
KEEP_ALIVE_TICK_S = 0.05
MIME = f"audio/pcm;rate={RATE}"


class Speaker(Protocol):
    """The client side the uplink sends through."""

    up: asyncio.Event
    session: Any


class Uplink:
    def __init__(self, speaker: Speaker, keep_alive: bool, stream_end: bool,
                 events: EventWriter) -> None:
        self.speaker = speaker
        self.keep_alive = keep_alive
        self.stream_end = stream_end
        self.events = events
        self.source_bytes = 0
        self.silence_bytes = 0
        self.sent_bytes = 0
        self.lost_bytes = 0
        self._buffer = bytearray()
        self._started = 0.0
        self._stalled = False

    def _behind_s(self) -> float:
        """How far the source (plus the silence sent for it) is behind the wall clock."""
        delivered = (self.source_bytes + self.silence_bytes) / SAMPLE_BYTES / RATE
        return time.monotonic() - self._started - delivered

    async def run(self) -> None:
        path = os.environ.get("FAULTLAB_MIC")
        if not path:
            self.events.emit("uplink.error", error="FAULTLAB_MIC is not set: no microphone")
            return
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError as exc:
            self.events.emit("uplink.error", error=f"cannot open the microphone {path}: {exc}")
            return
        self._started = time.monotonic()
        self.events.emit("uplink.start", keep_alive=self.keep_alive)
        keeper = asyncio.create_task(self._keep_alive()) if self.keep_alive else None
        try:
            while data := await reader.read(FRAME_BYTES):
                if self._stalled:
                    self._stalled = False
                    self.events.emit("uplink.source_back")
                self.source_bytes += len(data)
                self._buffer += data
                await self._flush()
        finally:
            if keeper is not None:
                keeper.cancel()
            writer.close()
        await self._flush(final=True)
        self.events.emit("uplink.source_end", source_s=self._seconds(self.source_bytes),
                         silence_s=self._seconds(self.silence_bytes),
                         sent_s=self._seconds(self.sent_bytes),
                         lost_s=self._seconds(self.lost_bytes))
        if self.stream_end and self.speaker.up.is_set():
            with contextlib.suppress(Exception):
                await self.speaker.session.send_realtime_input(audio_stream_end=True)
                self.events.emit("uplink.stream_end")

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(KEEP_ALIVE_TICK_S)
            behind = self._behind_s()
            if behind > KEEP_ALIVE_LAG_S:
                if not self._stalled:
                    self._stalled = True
                    self.events.emit("uplink.keep_alive", behind_s=round(behind, 3))
                pad = int(behind * RATE) * SAMPLE_BYTES
                self.silence_bytes += pad
                self._buffer += bytes(pad)
                await self._flush()

    async def _flush(self, final: bool = False) -> None:
        from google.genai import types

        while len(self._buffer) >= FRAME_BYTES or (final and self._buffer):
            frame = bytes(self._buffer[:FRAME_BYTES])
            del self._buffer[:FRAME_BYTES]
            if not self.speaker.up.is_set():
                self.lost_bytes += len(frame)  # no connection: the audio is gone, as on a phone
                continue
            try:
                await self.speaker.session.send_realtime_input(
                    audio=types.Blob(data=frame, mime_type=MIME))
                self.sent_bytes += len(frame)
            except Exception:
                self.lost_bytes += len(frame)

    @staticmethod
    def _seconds(n_bytes: int) -> float:
        return round(n_bytes / SAMPLE_BYTES / RATE, 3)
