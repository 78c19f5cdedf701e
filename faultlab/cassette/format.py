"""The cassette file: a recorded conversation, version 1 (docs/cassettes.md).

JSON lines, one record a line, each line's keys sorted (a message's own keys keep their order), so
that two cassettes diff line by line. The first
line is the header; every other line belongs to one connection (`conn`, numbered from 1 in the
order they opened) at `at`, seconds since the first connection opened:

    {"audio": "R0.cassette.audio", "cassette": 1, "protocol": "gemini", "source": "target", ...}
    {"at": 0.0, "conn": 1, "open": {"headers": {...}, "path": "/ws/...", "subprotocol": null}}
    {"at": 0.026, "conn": 1, "from": "client", "n": 1, "kind": "setup", "json": {...}}
    {"after": 1, "at": 0.287, "conn": 1, "from": "server", "kind": "setupComplete", "json": {...}}
    {"after": 3, "at": 9.1, "close": {"by": "server", "code": 1011, "reason": "..."}, "conn": 2}

A client message carries its number in its connection (`n`); a server message, a server's close
and a connection's end carry `after`: the number of the client message it followed (0: none yet).
A message is `json` (a JSON object, its keys in their order, its spacing not kept), `text` (any
other text) or `bytes` (base64, binary that is not UTF-8); `"binary": true` marks a JSON or text
message sent in a binary frame. Audio is not inlined: a base64 string under an audio field
(`data`, `audio`, `delta`) becomes "$audio:OFFSET:LENGTH" (":url" after it: base64's URL-safe
alphabet), its decoded bytes at that place in the side file the header names. Secrets are
placeholders (`<redacted len=N sha256=H>`, faultlab.private), the same secret always the same
one; a replay serves a stand-in of the same length for each (`stand_in`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from faultlab.cassette.tape import Side
from faultlab.errors import ProfileError
from faultlab.private import open_private
from faultlab.protocols import PROTOCOLS

VERSION = 1
SUFFIX = ".cassette.jsonl"
AUDIO_SUFFIX = ".cassette.audio"
# A run's own cassette, in its folder.
RUN_CASSETTE = "session" + SUFFIX
# What a replay does when the client departs from the recording: close (strict) or hand the
# connection to the emulator (fallback).
Divergence = Literal["strict", "fallback"]
# The fields whose base64 strings are audio, in both APIs' messages (Gemini's inline `data` and
# realtime `audio`; OpenAI's `audio` and its output's `delta`); and the shortest string moved to
# the side file (20 ms of 16 kHz audio is 856 characters: a short id stays where it is).
AUDIO_FIELDS = frozenset({"data", "audio", "delta"})
MIN_AUDIO_CHARS = 64
AUDIO_REF = re.compile(r"\$audio:(\d+):(\d+)(:url)?")
PLACEHOLDER = re.compile(r"<redacted len=(\d+) sha256=([0-9a-f]{8})>")


@dataclass(frozen=True)
class Said:
    """One message: who sent it, when, its kind and its frame's payload as it was sent."""

    at: float
    sender: Side
    kind: str
    payload: str | bytes  # bytes: a binary frame
    n: int = 0  # a client message's number in its connection
    after: int = 0  # a server message: the client message it followed


@dataclass(frozen=True)
class Ending:
    """How a connection ended: a close frame's code and reason, who sent it (None: no close
    frame), and the client message it followed."""

    at: float
    code: int | None
    reason: str
    by: Side | None
    after: int = 0


@dataclass
class Recorded:
    """One recorded connection."""

    conn: int
    at: float
    path: str
    subprotocol: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    said: list[Said] = field(default_factory=list)
    ending: Ending | None = None

    @property
    def client(self) -> list[Said]:
        return [s for s in self.said if s.sender == "client"]

    @property
    def server(self) -> list[Said]:
        return [s for s in self.said if s.sender == "server"]


@dataclass
class Cassette:
    protocol: str
    source: str
    connections: list[Recorded]
    personality: str | None = None
    recorded: str | None = None


def audio_path(path: Path) -> Path:
    """The side file of a cassette file: NAME.cassette.audio beside NAME.cassette.jsonl."""
    name = path.name
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else path.stem
    return path.with_name(stem + AUDIO_SUFFIX)


def stand_in(placeholder: str) -> str:
    """What a replay serves for a redacted secret: the same every time for the same secret, of
    its length (a UUID where the secret was one's length), never the secret."""
    match = PLACEHOLDER.fullmatch(placeholder)
    if match is None:
        return placeholder
    length, digest = int(match.group(1)), match.group(2)
    if length == 36:
        return str(uuid.UUID(hashlib.sha256(digest.encode()).hexdigest()[:32]))
    seed = hashlib.sha256(digest.encode()).hexdigest()
    return (seed * (length // len(seed) + 1))[:min(length, 4096)]


def with_stand_ins(text: str) -> str:
    """`text` with every secret's placeholder replaced by its stand-in."""
    return PLACEHOLDER.sub(lambda m: stand_in(m.group(0)), text) if "<redacted" in text else text


# Writing.


class _AudioOut:
    def __init__(self) -> None:
        self.data = bytearray()

    def take(self, value: Any, key: str | None) -> Any:
        """`value` with its audio moved out (a string that decodes and encodes back exactly)."""
        if isinstance(value, dict):
            return {k: self.take(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.take(v, key) for v in value]
        if (isinstance(value, str) and key in AUDIO_FIELDS and len(value) >= MIN_AUDIO_CHARS
                and not AUDIO_REF.fullmatch(value)):
            # Standard base64, or the URL-safe alphabet (the Python SDK's audio).
            url = "-" in value or "_" in value
            try:
                raw = (base64.urlsafe_b64decode(value) if url else
                       base64.b64decode(value, validate=True))
            except (binascii.Error, ValueError):
                return value
            if _b64(raw, url) != value:
                return value
            ref = f"$audio:{len(self.data)}:{len(raw)}" + (":url" if url else "")
            self.data += raw
            return ref
        return value


def _said_line(conn: int, said: Said, audio: _AudioOut) -> dict[str, Any]:
    line: dict[str, Any] = {"at": round(said.at, 6), "conn": conn, "from": said.sender,
                            "kind": said.kind}
    if said.sender == "client":
        line["n"] = said.n
    else:
        line["after"] = said.after
    if isinstance(said.payload, bytes):
        try:
            payload = said.payload.decode()
        except UnicodeDecodeError:
            line["bytes"] = base64.b64encode(said.payload).decode()
            return line
        line["binary"] = True
    else:
        payload = said.payload
    try:
        data = json.loads(payload)
    except ValueError:
        data = None
    if isinstance(data, dict):  # its keys in their order; its spacing is not kept
        line["json"] = audio.take(data, None)
    else:
        line["text"] = payload
    return line


def lines_of(cassette: Cassette, audio_name: str) -> tuple[list[dict[str, Any]], bytes]:
    """The cassette's lines and its side file's bytes (the header names the side file only
    when there is audio)."""
    audio = _AudioOut()
    header: dict[str, Any] = {"cassette": VERSION, "protocol": cassette.protocol,
                              "source": cassette.source}
    if cassette.personality is not None:
        header["personality"] = cassette.personality
    if cassette.recorded is not None:
        header["recorded"] = cassette.recorded
    lines = [header]
    for rec in cassette.connections:
        lines.append({"at": round(rec.at, 6), "conn": rec.conn, "open": {
            "path": rec.path, "subprotocol": rec.subprotocol, "headers": rec.headers}})
        lines.extend(_said_line(rec.conn, said, audio) for said in rec.said)
        if rec.ending is not None:
            e = rec.ending
            lines.append({"at": round(e.at, 6), "conn": rec.conn, "after": e.after,
                          "close": {"code": e.code, "reason": e.reason, "by": e.by}})
    if audio.data:
        header["audio"] = audio_name
    return lines, bytes(audio.data)


def write_cassette(path: Path, cassette: Cassette) -> Path:
    """Write the cassette at `path` (NAME.cassette.jsonl) and its side file; returns `path`."""
    side = audio_path(path)
    lines, audio = lines_of(cassette, side.name)
    with open_private(path, "w") as f:
        for line in lines:
            # The line's own keys sorted; a message's keep their order (it is served so).
            f.write(json.dumps({k: line[k] for k in sorted(line)}, ensure_ascii=False) + "\n")
    if audio:
        with open_private(side, "wb") as f:
            f.write(audio)
    else:
        side.unlink(missing_ok=True)
    return path


# Reading.


class CassetteError(ProfileError):
    """A cassette that cannot be read: each problem names its file, line and field."""


def _problem(path: Path, line: int, where: str, message: str) -> CassetteError:
    place = f"{path}:{line}" if line else str(path)
    return CassetteError([f"{place}: {where}: {message}" if where else f"{place}: {message}"])


def _audio_in(value: Any, audio: bytes, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _audio_in(v, audio, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_audio_in(v, audio, key) for v in value]
    if isinstance(value, str) and key in AUDIO_FIELDS and (m := AUDIO_REF.fullmatch(value)):
        start, size = int(m.group(1)), int(m.group(2))
        if start + size > len(audio):
            raise ValueError(f"{value} is past the side file's end ({len(audio)} bytes)")
        return _b64(audio[start:start + size], bool(m.group(3)))
    return value


def _b64(data: bytes, url: bool) -> str:
    return (base64.urlsafe_b64encode(data) if url else base64.b64encode(data)).decode()


def _payload(line: dict[str, Any], audio: bytes) -> str | bytes:
    if "bytes" in line:
        return base64.b64decode(line["bytes"], validate=True)
    if "json" in line:
        text = json.dumps(_audio_in(line["json"], audio), separators=(",", ":"),
                          ensure_ascii=False)
    elif "text" in line:
        text = str(line["text"])
    else:
        raise ValueError("a message needs one of json, text, bytes")
    return text.encode() if line.get("binary") else text


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        f = path.open(encoding="utf-8")
    except OSError as exc:
        raise _problem(path, 0, "", f"cannot read it: {exc.strerror or exc}") from None
    with f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError as exc:
                raise _problem(path, number, "", f"not JSON ({exc})") from None
            if not isinstance(line, dict):
                raise _problem(path, number, "", "not a JSON object")
            yield number, line


@dataclass(frozen=True)
class Header:
    protocol: str
    source: str
    audio: str | None
    personality: str | None
    recorded: str | None


def _header(path: Path, number: int, line: dict[str, Any]) -> Header:
    if line.get("cassette") != VERSION:
        raise _problem(path, number, "cassette",
                       f"not a version {VERSION} cassette (this faultlab reads version {VERSION})")
    protocol = line.get("protocol")
    if protocol not in PROTOCOLS:
        raise _problem(path, number, "protocol",
                       f"{protocol!r} is not one of {', '.join(sorted(PROTOCOLS))}")
    audio = line.get("audio")
    return Header(str(protocol), str(line.get("source", "")), None if audio is None else str(audio),
                  line.get("personality"), line.get("recorded"))


def read_header(path: Path) -> Header:
    """A cassette file's header line (CassetteError: it is not one)."""
    first = next(_lines(path), None)
    if first is None:
        raise _problem(path, 0, "", "empty: a cassette starts with its header line")
    return _header(path, *first)


class _Bad(Exception):
    """A field of a cassette line that is not what it must be."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where


_REQUIRED = object()


def _field(data: dict[str, Any], name: str, kinds: type | tuple[type, ...],
           default: Any = _REQUIRED, where: str = "") -> Any:
    """`data[name]` if it is one of `kinds` (a bool is no number), or `default` when absent."""
    at = f"{where}.{name}" if where else name
    if name not in data:
        if default is _REQUIRED:
            raise _Bad(at, "missing")
        return default
    value = data[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in (
            kinds if isinstance(kinds, tuple) else (kinds,))):
        raise _Bad(at, f"{value!r} is not {_KIND_NAMES.get(kinds, 'what it must be')}")
    return value


_NUMBER = (int, float)
_KIND_NAMES: dict[Any, str] = {int: "an integer", _NUMBER: "a number", str: "a string",
                               dict: "an object", (str, type(None)): "a string or null",
                               (int, type(None)): "an integer or null"}


def _side_file(path: Path, name: str) -> Path:
    if not name or "/" in name or name in (".", ".."):
        raise _Bad("audio", f"{name!r} is not a file name beside the cassette")
    return path.with_name(name)


def read_cassette(path: Path) -> Cassette:
    """A cassette file, its audio read back from its side file (CassetteError: where it is
    wrong, by line and field)."""
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        raise _problem(path, 0, "", "empty: a cassette starts with its header line")
    header = _header(path, *first)
    audio = b""
    if header.audio:
        try:
            side = _side_file(path, header.audio)
        except _Bad as exc:
            raise _problem(path, first[0], exc.where, str(exc)) from None
        try:
            audio = side.read_bytes()
        except OSError as exc:
            raise _problem(path, first[0], "audio",
                           f"cannot read {side}: {exc.strerror or exc}") from None
    cassette = Cassette(header.protocol, header.source, [], header.personality, header.recorded)
    by_conn: dict[int, Recorded] = {}
    for number, line in lines:
        try:
            _read_line(line, by_conn, cassette, audio)
        except _Bad as exc:
            raise _problem(path, number, exc.where, str(exc)) from None
    return cassette


def _read_line(line: dict[str, Any], by_conn: dict[int, Recorded], cassette: Cassette,
               audio: bytes) -> None:
    conn = _field(line, "conn", int)
    at = float(_field(line, "at", _NUMBER))
    if "open" in line:
        if conn in by_conn:
            raise _Bad("conn", f"connection {conn} opens twice")
        opened = _field(line, "open", dict)
        by_conn[conn] = rec = Recorded(
            conn, at, _field(opened, "path", str, where="open"),
            _field(opened, "subprotocol", (str, type(None)), None, "open"),
            {str(k): str(v) for k, v in _field(opened, "headers", dict, {}, "open").items()})
        cassette.connections.append(rec)
        return
    if conn not in by_conn:
        raise _Bad("conn", f"connection {conn} has no open line before it")
    rec = by_conn[conn]
    told = len(rec.client)  # the client messages before this line
    if "close" in line:
        closed = _field(line, "close", dict)
        by = _field(closed, "by", (str, type(None)), None, "close")
        if by not in ("client", "server", None):
            raise _Bad("close.by", f"{by!r} is not client, server or null")
        rec.ending = Ending(at, _field(closed, "code", (int, type(None)), None, "close"),
                            _field(closed, "reason", str, "", "close"), by,
                            _after(line, told))
        return
    sender = _field(line, "from", str)
    if sender not in ("client", "server"):
        raise _Bad("from", f"{sender!r} is neither client nor server")
    try:
        payload = _payload(line, audio)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise _Bad("json" if "json" in line else "text" if "text" in line else "bytes",
                   str(exc)) from None
    kind = _field(line, "kind", str, "")
    if sender == "client":
        n = _field(line, "n", int)
        if n != told + 1:
            raise _Bad("n", f"{n} follows client message {told} of connection {rec.conn}: "
                            f"it must be {told + 1}")
        rec.said.append(Said(at, "client", kind, payload, n=n))
    else:
        rec.said.append(Said(at, "server", kind, payload, after=_after(line, told)))


def _after(line: dict[str, Any], told: int) -> int:
    after = _field(line, "after", int, 0)
    if not 0 <= after <= told:
        raise _Bad("after", f"{after} is not one of the {told} client messages before it")
    return int(after)
