"""A tape becomes a cassette: connections numbered in the order they opened, times from the first
opening, each message named by its protocol's kind, each server message and close tied to the
client message it followed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from faultlab.cassette.format import (
    RUN_CASSETTE,
    Cassette,
    Ending,
    Recorded,
    Said,
    write_cassette,
)
from faultlab.cassette.tape import (
    Closed,
    Message,
    Opened,
    Record,
    kept_headers,
    read_tape,
    redacted_bytes,
    redacted_text,
)
from faultlab.private import credentials, redact_text, remember_secrets
from faultlab.protocols import DEFAULT, PROTOCOLS, recognising


def kind_of(protocol: str, payload: str | bytes) -> str:
    """A message's kind in its protocol's words; `text` or `binary` for one that is none."""
    kind = PROTOCOLS[protocol].describe(payload).get("kind")
    return str(kind) if kind else ("binary" if isinstance(payload, bytes) else "text")


def protocol_of(records: Iterable[Record]) -> str:
    """The protocol a tape's first JSON message has the shape of (a capture names none); the
    default's when none has one."""
    for record in records:
        if isinstance(record, Message):
            try:
                data = json.loads(record.data)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(data, dict) and data:
                return recognising(data).name
    return DEFAULT.name


def build(records: Iterable[Record], protocol: str, source: str,
          personality: str | None = None) -> Cassette:
    """The cassette of a tape's records (in the order its source saw them), every secret
    redacted."""
    cassette = Cassette(protocol, source, [], personality,
                        datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    by_key: dict[int, Recorded] = {}
    counts: dict[int, int] = {}
    start: float | None = None
    for record in records:
        if start is None:
            start = record.t
        at = record.t - start
        if isinstance(record, Opened):
            # Whatever wrote the tape, no secret goes further (a capture's tape is not redacted
            # yet; redacting a redacted one changes nothing).
            remember_secrets(credentials(record.path, record.headers or {}))
            rec = Recorded(len(cassette.connections) + 1, at, redact_text(record.path),
                           None if record.subprotocol is None else redact_text(record.subprotocol),
                           kept_headers(record.headers or {}))
            by_key[record.conn] = rec
            counts[record.conn] = 0
            cassette.connections.append(rec)
            continue
        rec_or_none = by_key.get(record.conn)
        if rec_or_none is None or rec_or_none.ending is not None:
            continue  # a connection whose opening the source did not see, or after its end
        rec = rec_or_none
        if isinstance(record, Closed):
            rec.ending = Ending(at, record.code, redact_text(record.reason), record.by,
                                counts[record.conn])
            continue
        data = (redacted_bytes(record.data) if isinstance(record.data, bytes)
                else redacted_text(record.data))
        kind = kind_of(protocol, data)
        if record.sender == "client":
            counts[record.conn] += 1
            rec.said.append(Said(at, "client", kind, data, n=counts[record.conn]))
        else:
            rec.said.append(Said(at, "server", kind, data, after=counts[record.conn]))
    return cassette


# A run's tapes, by who wrote them, in the order the run's cassette prefers them: the target's
# own sees the server's timing; the proxy's, the server leg of a target that records nothing.
TAPES = ("target.tape.jsonl", "proxy.tape.jsonl")


def cassette_of_run(run_dir: Path, protocol: str, personality: str | None) -> Path | None:
    """The run's cassette (RUN_CASSETTE) made of its tape, which is then removed; None when the
    run left no tape (it did not record, or its target never started)."""
    tapes = [run_dir / name for name in TAPES if (run_dir / name).exists()]
    if not tapes:
        return None
    source = tapes[0].name.split(".", 1)[0]
    cassette = build(read_tape(tapes[0]), protocol, source, personality)
    path = write_cassette(run_dir / RUN_CASSETTE, cassette)
    for tape in tapes:
        tape.unlink()
    return path
