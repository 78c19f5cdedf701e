"""The clients' audio path: the lab's microphone to the session, with an audio keep-alive.

The microphone (`FAULTLAB_MIC`, a unix socket the lab serves) hands over 16 kHz 16-bit mono PCM
at real-time rate and ends with EOF. The uplink coalesces it into 100 ms messages (Gemini's
`realtimeInput.audio`; OpenAI's `input_audio_buffer.append`, resampled to 24 kHz). The server's
VAD ends a turn only on silence that arrives as samples at real-time rate
(docs/live-server-behaviour.md A1-A3), so a source that stalls (a browser handing empty buffers)
would leave the turn hanging: the keep-alive fills such pauses with silent samples. It is keyed
on the source's arrival, not on the uplink's sends (a bursty sender would look stalled, §8.10):
whenever the source is more than 200 ms behind the wall clock since it started, the gap is sent
as silence.

`keep_alive="uplink"` is the mistake §8.10 warns of, kept to show it: keyed on the uplink's
deliveries (a frame counts once the connection's TCP has had its bytes acknowledged; without a
socket to ask, once its send returned), a bursty path (jitter, a queue on a congested link) that
delivers nothing for 200 ms looks like a stalled source, and silence is queued behind speech that
was only late.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import os
import socket
import struct
import termios
import time
from typing import Any, Literal, Protocol

from websockets.exceptions import ConnectionClosed

from faultlab.clients import sdk
from faultlab.events import EventWriter
from faultlab.vocabulary.audio import (
    UplinkError,
    UplinkKeepAlive,
    UplinkSourceBack,
    UplinkSourceEnd,
    UplinkStart,
    UplinkStreamEnd,
)

RATE = 16000
SAMPLE_BYTES = 2
FRAME_S = 0.1
FRAME_BYTES = int(RATE * FRAME_S) * SAMPLE_BYTES
# How far the source may fall behind real time before the keep-alive speaks for it: one frame's
# worth of slack over the 100 ms coalescing, so an on-time source never gets silence mixed in.
KEEP_ALIVE_LAG_S = 0.2
KEEP_ALIVE_TICK_S = 0.05
# What the keep-alive measures the wall clock against: the source's arrival (right), the
# uplink's sends (the mistake), or nothing (no keep-alive).
KeepAlive = Literal["source", "uplink"] | None
# Linux's struct tcp_info: tcpi_bytes_acked, a u64 at byte 120 (kernel 4.1 and later).
TCP_INFO_BYTES_ACKED = struct.Struct("=Q")
TCP_INFO_BYTES_ACKED_AT = 120


class Speaker(Protocol):
    """The client side the uplink sends through, in its API's messages."""

    up: asyncio.Event
    session: Any

    async def send_audio(self, pcm: bytes) -> None:
        """Send 16 kHz 16-bit mono PCM (raises when the connection cannot take it)."""

    async def end_audio(self) -> None:
        """Tell the server the audio stream has ended, where the API can say so."""


class Uplink:
    def __init__(self, speaker: Speaker, keep_alive: KeepAlive, stream_end: bool,
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
        self._last_sent_at = 0.0
        self._stalled = False
        self._queued = asyncio.Event()
        self._source_ended = False
        self._failed = False  # a send failed otherwise than by the connection's end
        self._marks: collections.deque[int] = collections.deque()
        self._marked: object = None  # the session the marks count the bytes of

    def _behind_s(self) -> float:
        """How far behind the wall clock the keep-alive thinks the audio is: the source plus
        the silence made for it; or, keyed on the uplink, the time since it last delivered a
        frame (or padded)."""
        now = time.monotonic()
        if self.keep_alive == "uplink":
            if self._delivered(self._tcp()):
                self._last_sent_at = now
            return now - self._last_sent_at
        delivered = (self.source_bytes + self.silence_bytes) / SAMPLE_BYTES / RATE
        return now - self._started - delivered

    def _tcp(self) -> socket.socket | None:
        """The session's TCP socket (through the SDK's websocket), if it can be reached."""
        return sdk.tcp_socket(self.speaker.session)

    def _mark_sent(self) -> None:
        """Keyed on the uplink: the connection's byte count once this frame is handed over
        (acknowledged so far plus still queued), which TCP's acknowledgements must pass; without
        a socket to ask, the send itself counts."""
        sock = self._tcp()
        try:
            if sock is None:
                raise OSError("no socket")
            queued = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ,
                                                    b"\0" * 4))[0]
            mark = _bytes_acked(sock) + queued
        except OSError:
            self._last_sent_at = time.monotonic()
            return
        if self._marked is not self.speaker.session:  # a new connection counts from 0
            self._marks.clear()
            self._marked = self.speaker.session
        self._marks.append(mark)

    def _delivered(self, sock: socket.socket | None) -> bool:
        """Whether a frame's bytes were acknowledged since the last look."""
        if sock is None or not self._marks or self._marked is not self.speaker.session:
            return False
        try:
            acked = _bytes_acked(sock)
        except OSError:
            return False
        delivered = False
        while self._marks and self._marks[0] <= acked:
            self._marks.popleft()
            delivered = True
        return delivered

    async def run(self) -> None:
        path = os.environ.get("FAULTLAB_MIC")
        if not path:
            self.events.announce(UplinkError("FAULTLAB_MIC is not set: no microphone"))
            return
        try:
            reader, writer = await asyncio.open_unix_connection(path)
        except OSError as exc:
            self.events.announce(UplinkError(f"cannot open the microphone {path}: {exc}"))
            return
        self._started = self._last_sent_at = time.monotonic()
        self.events.announce(UplinkStart(self.keep_alive))
        # The source is read apart from the sends: a session that holds the sends back (a
        # congested path) must not stop the reading, or the source would look stalled too.
        sender = asyncio.create_task(self._send_loop())
        keeper = asyncio.create_task(self._keep_alive()) if self.keep_alive else None
        try:
            while data := await reader.read(FRAME_BYTES):
                if self._stalled:
                    self._stalled = False
                    self.events.announce(UplinkSourceBack())
                self.source_bytes += len(data)
                self._queue(data)
        except BaseException:
            sender.cancel()
            raise
        finally:
            if keeper is not None:
                keeper.cancel()
            writer.close()
            self._source_ended = True
            self._queued.set()
        await sender
        self.events.announce(UplinkSourceEnd(
            source_s=self._seconds(self.source_bytes), silence_s=self._seconds(self.silence_bytes),
            sent_s=self._seconds(self.sent_bytes), lost_s=self._seconds(self.lost_bytes)))
        if self.stream_end and self.speaker.up.is_set():
            with contextlib.suppress(Exception):
                await self.speaker.end_audio()
                self.events.announce(UplinkStreamEnd())

    def _queue(self, data: bytes) -> None:
        self._buffer += data
        self._queued.set()

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(KEEP_ALIVE_TICK_S)
            behind = self._behind_s()
            if behind > KEEP_ALIVE_LAG_S:
                if not self._stalled:
                    self._stalled = True
                    self.events.announce(UplinkKeepAlive(round(behind, 3)))
                pad = int(behind * RATE) * SAMPLE_BYTES
                self.silence_bytes += pad
                if self.keep_alive == "uplink":  # the pad counts as a delivery for this key
                    self._last_sent_at = time.monotonic()
                self._queue(bytes(pad))

    async def _send_loop(self) -> None:
        """Send whole 100 ms frames as they are queued; the rest once the source has ended."""
        while True:
            await self._queued.wait()
            self._queued.clear()
            ended = self._source_ended  # read before the sends: it may end while they wait
            await self._flush(final=ended)
            if ended:
                return

    async def _flush(self, final: bool = False) -> None:
        while len(self._buffer) >= FRAME_BYTES or (final and self._buffer):
            frame = bytes(self._buffer[:FRAME_BYTES])
            del self._buffer[:FRAME_BYTES]
            if not self.speaker.up.is_set():
                self.lost_bytes += len(frame)  # no connection: the audio is gone, as on a phone
                continue
            try:
                await self.speaker.send_audio(frame)
            except Exception as exc:
                # A connection going down loses the frame, as on a phone; anything else is the
                # client's own error, said once (it would otherwise pass for lost audio).
                self.lost_bytes += len(frame)
                if not self._failed and not isinstance(exc, ConnectionClosed | OSError):
                    self._failed = True
                    self.events.announce(UplinkError(f"{type(exc).__name__}: {exc}"[:200]))
                continue
            self.sent_bytes += len(frame)
            if self.keep_alive == "uplink":
                self._mark_sent()

    @staticmethod
    def _seconds(n_bytes: int) -> float:
        return round(n_bytes / SAMPLE_BYTES / RATE, 3)


def _bytes_acked(sock: socket.socket) -> int:
    """How many bytes the connection's peer has acknowledged (TCP_INFO)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int(TCP_INFO_BYTES_ACKED.unpack_from(info, TCP_INFO_BYTES_ACKED_AT)[0])
