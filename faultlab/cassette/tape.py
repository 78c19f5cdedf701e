"""A tape: what one source saw of a run's WebSocket connections, as it saw it, before it becomes
a cassette (`faultlab.cassette.build`).

Three sources write tapes: the emulator (`emulator serve --record`), the proxy (its frame log,
against any target) and a capture (`faultlab cassette from-pcap`). A tape is JSON lines, one
record each, in the order the source saw them; times are seconds on the source's own clock.
Secrets are redacted as the tape is written (`faultlab.private.redact`), so no file ever holds
them, even a tape a crash left behind.

    {"t": 12.5, "conn": 1, "open": {"path": "/ws/...", "subprotocol": null, "headers": {...}}}
    {"t": 12.6, "conn": 1, "from": "client", "text": "{\\"setup\\": ...}"}
    {"t": 12.9, "conn": 1, "from": "server", "binary": "<base64>"}
    {"t": 20.1, "conn": 1, "close": {"code": 1011, "reason": "...", "by": "server"}}

`by` is who sent the close frame (`server`, `client`), or null when the connection ended
without one (an abort, a reset, a path that died).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from faultlab.private import credentials, open_private, redact, redact_text, remember_secrets

Side = Literal["client", "server"]

# Request headers a cassette keeps: what a replay or a reader may want to know of the client.
# The rest (the WebSocket key, hop-by-hop headers, cookies) say nothing of the conversation.
KEPT_HEADERS = ("user-agent", "x-goog-api-client", "openai-beta", "sec-websocket-protocol",
                "sec-websocket-extensions", "origin")


@dataclass(frozen=True, slots=True)
class Opened:
    t: float
    conn: int
    path: str
    subprotocol: str | None = None
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Message:
    t: float
    conn: int
    sender: Side
    data: str | bytes  # str: a text frame; bytes: a binary one


@dataclass(frozen=True, slots=True)
class Closed:
    t: float
    conn: int
    code: int | None
    reason: str = ""
    by: Side | None = None


Record = Opened | Message | Closed


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers a tape keeps (lower-case names), secrets redacted."""
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    return {name: redact_text(lower[name]) for name in KEPT_HEADERS if name in lower}


def to_json(record: Record) -> dict[str, Any]:
    """One record as its tape line says it, secrets redacted."""
    if isinstance(record, Opened):
        return {"t": round(record.t, 6), "conn": record.conn, "open": {
            "path": redact_text(record.path), "subprotocol": (
                None if record.subprotocol is None else redact_text(record.subprotocol)),
            "headers": kept_headers(record.headers or {})}}
    if isinstance(record, Closed):
        return {"t": round(record.t, 6), "conn": record.conn, "close": {
            "code": record.code, "reason": redact_text(record.reason), "by": record.by}}
    line: dict[str, Any] = {"t": round(record.t, 6), "conn": record.conn, "from": record.sender}
    if isinstance(record.data, bytes):
        line["binary"] = base64.b64encode(redacted_bytes(record.data)).decode()
    else:
        line["text"] = redacted_text(record.data)
    return line


def redacted_text(text: str) -> str:
    """A text frame with its secrets redacted: a JSON message field by field (a handle or a
    token by its field's name, as everywhere), anything else as text."""
    try:
        data = json.loads(text)
    except ValueError:
        return redact_text(text)
    return json.dumps(redact(data), separators=(",", ":"), ensure_ascii=False)


def redacted_bytes(data: bytes) -> bytes:
    """A binary frame with its secrets redacted: one that holds UTF-8 JSON as a text frame is."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data
    return redacted_text(text).encode()


def from_json(line: Mapping[str, Any]) -> Record:
    """One tape line as its record (ValueError: not one)."""
    t, conn = float(line["t"]), int(line["conn"])
    if "open" in line:
        opened = line["open"]
        return Opened(t, conn, str(opened["path"]), opened.get("subprotocol"),
                      dict(opened.get("headers") or {}))
    if "close" in line:
        closed = line["close"]
        return Closed(t, conn, closed.get("code"), str(closed.get("reason") or ""),
                      closed.get("by"))
    sender = line["from"]
    if sender not in ("client", "server"):
        raise ValueError(f"from: {sender!r} is neither client nor server")
    if "binary" in line:
        return Message(t, conn, sender, base64.b64decode(line["binary"]))
    return Message(t, conn, sender, str(line["text"]))


class TapeWriter:
    """Writes a tape as the source sees its connections: each line flushed, so that a run that
    ends badly still leaves what was seen."""

    def __init__(self, path: Path) -> None:
        self._file: IO[str] = open_private(path, "w")

    def opened(self, t: float, conn: int, path: str, headers: Mapping[str, str],
               subprotocol: str | None) -> None:
        self.write(Opened(t, conn, path, subprotocol, headers))

    def write(self, record: Record) -> None:
        if isinstance(record, Opened):
            # The client's key is redacted wherever it appears later (a message may echo it).
            remember_secrets(credentials(record.path, record.headers or {}))
        self._file.write(json.dumps(to_json(record), ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_tape(path: Path) -> Iterator[Record]:
    """The records of a tape file (ValueError naming the line: a line that is not one)."""
    with path.open(encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                yield from_json(json.loads(text))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a tape record ({exc})") from None

