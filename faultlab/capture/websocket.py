"""WebSocket frames from one direction of a reassembled plain-`ws://` TCP stream (RFC 6455).

Frames inside TLS come from tshark instead (`faultlab.capture.tshark`), as the same `WsFrame`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from faultlab.protocols import recognising

OPCODES = {0: "continuation", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}
MAX_HEADER_BYTES = 16384


@dataclass(frozen=True, slots=True)
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


class WsStreamDecoder:
    """Feed one direction's bytes in order; frames come out once complete.

    The stream must open with an HTTP Upgrade request (client) or a 101 response (server);
    anything else (TLS, plain HTTP) switches the decoder off for good, and `tls` says whether it
    opened with a TLS handshake record.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._in_frames = False
        self.active = True
        self.tls = False

    @property
    def upgraded(self) -> bool:
        """The stream's HTTP Upgrade is behind: frames follow."""
        return self._in_frames

    def feed(self, ts: float, data: bytes) -> list[WsFrame]:
        if not self.active:
            return []
        self._buf += data
        if not self._in_frames and not self._handshake():
            return []
        return self._frames(ts)

    def _handshake(self) -> bool:
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
        head = bytes(buf[:end]).lower()
        if not (b"upgrade: websocket" in head or head.startswith(b"http/1.1 101")):
            self.active = False
            return False
        del buf[: end + 4]
        self._in_frames = True
        return True

    def _frames(self, ts: float) -> list[WsFrame]:
        buf, out, pos = self._buf, [], 0
        while len(buf) - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            length, head = b1 & 0x7F, 2
            if length == 126:
                if len(buf) - pos < 4:
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 4]), 4
            elif length == 127:
                if len(buf) - pos < 10:
                    break
                length, head = int.from_bytes(buf[pos + 2 : pos + 10]), 10
            masked = bool(b1 & 0x80)
            key_at = pos + head
            start = key_at + (4 if masked else 0)
            if len(buf) < start + length:
                break
            opcode, fin = b0 & 0x0F, bool(b0 & 0x80)
            code = reason = kind = None
            if (opcode == 8 and length >= 2) or (opcode == 1 and fin):
                payload = bytes(buf[start : start + length])
                if masked:
                    payload = _unmask(payload, bytes(buf[key_at : key_at + 4]))
                if opcode == 8:
                    code = int.from_bytes(payload[:2])
                    reason = payload[2:].decode(errors="replace")
                else:
                    kind = message_kind(payload)
            out.append(WsFrame(ts, OPCODES.get(opcode, f"0x{opcode:x}"), length, fin, masked,
                               code, reason, kind))
            pos = start + length
        del buf[:pos]
        return out


def _unmask(payload: bytes, key: bytes) -> bytes:
    """RFC 6455 5.3, as one XOR of big integers: text frames (audio chunks of kilobytes) are now
    unmasked to name their kind, and a byte-by-byte loop made that the inspector's hot spot."""
    n = len(payload)
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload) ^ int.from_bytes(stream)).to_bytes(n)


def message_kind(payload: bytes | str) -> str | None:
    """The kind of one whole text message, in the words of the protocol whose shape it has;
    None when it is not a JSON object."""
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    return recognising(data).kind_of(data) if isinstance(data, dict) else None
