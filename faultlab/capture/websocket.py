"""WebSocket frames from one direction of a reassembled plain-`ws://` TCP stream (RFC 6455).

Frames inside TLS come from tshark instead (`faultlab.capture.tshark`), as the same `WsFrame`.
With payloads asked for, each whole message comes with its last frame, and each direction's
handshake (the Upgrade request, the 101 answer) as an `HttpHead`: what a cassette is made of.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from faultlab.protocols import recognising

OPCODES = {0: "continuation", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}
_NAMES = tuple(OPCODES.get(opcode, f"0x{opcode:x}") for opcode in range(16))
MAX_HEADER_BYTES = 16384
# What RFC 7692 (7.2.1) strips from the end of each compressed message, to be put back to
# inflate it.
DEFLATE_TAIL = b"\x00\x00\xff\xff"

type Message = str | bytes


# Not frozen, as `Segment`: a frozen dataclass took 2.8 us to make against 0.5 us (Python 3.13),
# once a frame. Nothing changes a frame once made (`dataclasses.replace` makes a new one).
@dataclass(slots=True)
class WsFrame:
    """One frame: when its last byte arrived (unix time), its kind, payload length, close details."""

    ts: float
    opcode: str
    length: int
    fin: bool
    masked: bool
    close_code: int | None = None
    close_reason: str | None = None
    # A whole text message's kind (in its protocol's words, faultlab.protocols), when it is one.
    kind: str | None = None
    # For a close frame: when the other end's last packet, and its last new data, came before it
    # (unix time): how long the peer had been silent when this end closed (L7's idle reaping).
    # Context rather than content: two copies of a frame are equal whatever preceded them.
    peer_last_ts: float | None = field(default=None, compare=False)
    peer_last_data_ts: float | None = field(default=None, compare=False)
    # Only when the walk was asked for payloads, on the last frame of a text or binary message:
    # the whole message, unmasked, its fragments joined and permessage-deflate inflated (str for
    # text, bytes for binary).
    message: Message | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class HttpHead:
    """One end's half of a WebSocket's opening handshake: the client's Upgrade request or the
    server's answer, its start line (`GET /path HTTP/1.1`, `HTTP/1.1 101 Switching Protocols`),
    its headers in the order sent, and when its last byte arrived (unix time)."""

    ts: float
    start_line: str
    headers: tuple[tuple[str, str], ...]

    @property
    def path(self) -> str:
        """A request's target: the path and query the client asked for."""
        parts = self.start_line.split(" ")
        return parts[1] if len(parts) > 1 else ""

    @property
    def status(self) -> int | None:
        """An answer's status code (101: the WebSocket is open); None for a request."""
        parts = self.start_line.split(" ")
        if not parts[0].upper().startswith("HTTP/") or len(parts) < 2 or not parts[1].isdigit():
            return None
        return int(parts[1])

    def header(self, name: str) -> str | None:
        """A header's value (its name in any case; several of one name joined by ", ")."""
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ", ".join(values) if values else None

    def header_map(self) -> dict[str, str]:
        """The headers by name as sent, several of one name joined by ", "."""
        return {name: self.header(name) or "" for name, _ in self.headers}


def header_lines(lines: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`Name: value` lines as (name, value) pairs, spaces around the value dropped; a line
    without a colon is not a header and is passed over."""
    headers = []
    for line in lines:
        name, colon, value = line.partition(":")
        if colon and name.strip():
            headers.append((name.strip(), value.strip()))
    return tuple(headers)


def parse_head(ts: float, head: bytes) -> HttpHead:
    """An HTTP head as it came, without the blank line that ends it."""
    start_line, *lines = head.decode("latin-1").split("\r\n")
    return HttpHead(ts, start_line, header_lines(lines))


class WsStreamDecoder:
    """Feed one direction's bytes in order; frames come out once complete.

    The stream must open with an HTTP Upgrade request (client) or a 101 response (server);
    anything else (TLS, plain HTTP) switches the decoder off for good, and `tls` says whether it
    opened with a TLS handshake record. With `payloads`, the head is kept (`handshake`) and each
    message's last frame carries the message.
    """

    def __init__(self, payloads: bool = False) -> None:
        # Bytes held for a frame (or a head) not yet whole. While it is empty, as it is after
        # most segments, a segment's frames are read from the segment itself, copied nowhere.
        self._buf = bytearray()
        self._in_frames = False
        self.active = True
        self.tls = False
        self.payloads = payloads
        self.handshake: HttpHead | None = None
        self._message: _Message | None = None
        self._inflater: zlib._Decompress | None = None

    @property
    def upgraded(self) -> bool:
        """The stream's HTTP Upgrade is behind: frames follow."""
        return self._in_frames

    def feed(self, ts: float, data: bytes) -> list[WsFrame]:
        if not self.active:
            return []
        buf = self._buf
        if not self._in_frames:
            buf += data
            if not self._handshake(ts):
                return []
            if not buf:
                return []
        elif buf:
            buf += data
        else:
            frames, pos = self._frames(ts, data)
            if pos < len(data):
                buf += memoryview(data)[pos:]
            return frames
        frames, pos = self._frames(ts, buf)
        del buf[:pos]
        return frames

    def _handshake(self, ts: float) -> bool:
        buf = self._buf
        if len(buf) >= 5 and not (buf.startswith(b"GET ") or buf.startswith(b"HTTP/")):
            self.active = False
            # A handshake record (22) of TLS 1.0-1.3, whose record layer always says 3.x.
            self.tls = buf[0] == 0x16 and buf[1] == 0x03
            return False
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEADER_BYTES:
                self.active = False
            return False
        head = bytes(buf[:end])
        lower = head.lower()
        if not (b"upgrade: websocket" in lower or lower.startswith(b"http/1.1 101")):
            self.active = False
            return False
        if self.payloads:
            self.handshake = parse_head(ts, head)
        del buf[: end + 4]
        self._in_frames = True
        return True

    def _frames(self, ts: float, buf: bytes | bytearray) -> tuple[list[WsFrame], int]:
        """The whole frames at the start of `buf`, and where the first one not whole starts."""
        out: list[WsFrame] = []
        append, payloads = out.append, self.payloads
        pos, end = 0, len(buf)
        while end - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            length, head = b1 & 0x7F, 2
            if length == 126:
                if end - pos < 4:
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 4]), 4
            elif length == 127:
                if end - pos < 10:
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 10]), 10
            masked = b1 > 0x7F
            key_at = pos + head
            start = key_at + 4 if masked else key_at
            stop = start + length
            if stop > end:
                break
            opcode, fin = b0 & 0x0F, b0 > 0x7F
            if (opcode == 1 and fin) or (opcode == 8 and length >= 2) or (payloads and opcode < 3):
                payload = bytes(buf[start:stop])  # no copy when `buf` is bytes
                if masked:
                    payload = _unmask(payload, buf[key_at:start])
                if opcode == 8:
                    append(WsFrame(ts, "close", length, fin, masked, int.from_bytes(payload[:2]),
                                   payload[2:].decode(errors="replace")))
                elif payloads:
                    append(WsFrame(ts, _NAMES[opcode], length, fin, masked, None, None,
                                   message_kind(payload) if opcode == 1 and fin else None,
                                   message=self._assemble(opcode, fin, b0 & 0x40 != 0, payload)))
                else:  # a whole text message, in one frame
                    append(WsFrame(ts, "text", length, True, masked, None, None,
                                   message_kind(payload)))
            else:
                append(WsFrame(ts, _NAMES[opcode], length, fin, masked))
            pos = stop
        return out, pos

    def _assemble(self, opcode: int, fin: bool, rsv1: bool, payload: bytes) -> Message | None:
        """A data frame's part of its message: the whole message at its last frame."""
        if opcode != 0:  # a new message; one left unfinished before it is lost
            self._message = _Message(opcode == 1, rsv1)
        if self._message is None:  # a continuation of nothing
            return None
        self._message.parts.append(payload)
        if not fin:
            return None
        message, self._message = self._message, None
        return message.whole(self)

    def inflate(self, data: bytes) -> bytes:
        """One permessage-deflate message inflated (RFC 7692). One inflater serves the whole
        direction, keeping its window from message to message: right whether or not the
        extension kept the compressor's context, as a message compressed afresh refers to no
        earlier bytes."""
        if self._inflater is None:
            self._inflater = zlib.decompressobj(wbits=-15)
        return self._inflater.decompress(data + DEFLATE_TAIL)


@dataclass(slots=True)
class _Message:
    """A message whose frames are coming: text or binary, compressed or not, its parts so far."""

    text: bool
    compressed: bool
    parts: list[bytes] = field(default_factory=list)

    def whole(self, decoder: WsStreamDecoder) -> Message | None:
        data = b"".join(self.parts)
        if self.compressed:
            try:
                data = decoder.inflate(data)
            except zlib.error:
                return None
        return data.decode(errors="replace") if self.text else data


def _unmask(payload: bytes, key: bytes | bytearray) -> bytes:
    """RFC 6455 5.3, as one XOR of big integers: text frames (audio chunks of kilobytes) are now
    unmasked to name their kind, and a byte-by-byte loop made that the inspector's hot spot."""
    n = len(payload)
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload) ^ int.from_bytes(stream)).to_bytes(n)


# The C scanner `json.loads` ends in (typeshed does not declare the attribute).
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json(payload: bytes | str) -> object:
    """`json.loads(payload)`, sooner when the text is an object from its first byte, as every
    message of the realtime APIs is: read by the decoder's scanner alone, 1.8 us of a 3.6 us
    `loads` for a 113-byte audio message (the rest: checks, encoding detection, whitespace)."""
    if isinstance(payload, bytes):
        # `loads` reads bytes as UTF-8 unless a BOM or a NUL in the first bytes says UTF-16 or 32.
        if payload[:1] != b"{" or payload[1:2] == b"\x00":
            return json.loads(payload)
        text = payload.decode("utf-8", "surrogatepass")
    elif payload[:1] != "{":
        return json.loads(payload)
    else:
        text = payload
    try:
        data, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)  # raises as `loads` does
    return data if end == len(text) else json.loads(text)


def message_kind(payload: bytes | str) -> str | None:
    """The kind of one whole text message, in the words of the protocol whose shape it has;
    None when it is not a JSON object."""
    try:
        data = _json(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return recognising(data).kind_of(data) if isinstance(data, dict) else None
