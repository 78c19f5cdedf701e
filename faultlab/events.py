"""The event bus: everything a run observes, on one clock, in one JSONL file.

An event is a line `{"t": <seconds since the run started>, "source": ..., "event": <name>, ...}`.
Clients add their own events by appending JSON lines to the file named in `FAULTLAB_EVENTS`
(`{"event": "client.lost", "ts": <unix time>, ...}`); the run tails those files
(faultlab.sources) and puts their events on the bus, converting `ts` to the run clock. Secrets
never reach a file: both writers redact every event on its way out (faultlab.private).
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from faultlab.private import (
    PRIVATE_FILE,
    json_default,
    open_private,
    redact,
    remember_env_secrets,
)

# Whether a message of kind `actual` is one a profile asking for `wanted` means (a protocol's
# `kind_matches`).
KindMatch = Callable[[str, str], bool]


@dataclass(frozen=True)
class Event:
    """One observation: when (run clock, seconds), who saw it, what it is, and its fields."""

    t: float
    source: str
    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, name: str, where: Mapping[str, Any] | None = None,
                kinds: KindMatch | None = None) -> bool:
        """True when the event has this name and every `where` field equals the given value; with
        `kinds` (the run's protocol's `kind_matches`), a message's `kind` matches as in a frame
        trigger: in either spelling (`toolCall`), or by one of its parts
        (`serverContent.turnComplete`)."""
        if self.name != name:
            return False
        for key, wanted in (where or {}).items():
            actual = self.fields.get(key)
            if key == "kind" and kinds is not None and isinstance(actual, str) \
                    and isinstance(wanted, str):
                if not kinds(actual, wanted):
                    return False
            elif actual != wanted:
                return False
        return True

    @property
    def began(self) -> float:
        """When what it records began: an event with `applied_in_ms` (`fault.applied`) is stamped
        once what it records is in place, and what that causes can be seen from when it began (a
        close the proxy sends is echoed by the peer before the stamp)."""
        took = self.fields.get("applied_in_ms")
        if isinstance(took, int | float) and not isinstance(took, bool):
            return self.t - float(took) / 1000
        return self.t

    def to_json(self) -> str:
        return json.dumps(
            {"t": round(self.t, 6), "source": self.source, "event": self.name, **self.fields},
            default=json_default,
        )

    @classmethod
    def from_json(cls, line: str) -> Event:
        data = json.loads(line)
        return cls(float(data.pop("t")), str(data.pop("source")), str(data.pop("event")), data)


def read_events(path: Path) -> list[Event]:
    """The events of a finished run's events.jsonl (a line cut short by a crash is skipped)."""
    events = []
    with path.open() as lines:
        for line in lines:
            try:
                events.append(Event.from_json(line))
            except (ValueError, KeyError):
                continue
    return events


class RunClock:
    """Seconds since the run started, monotonic; converts unix times written by other processes."""

    def __init__(self) -> None:
        self.t0_monotonic = time.monotonic()
        self.t0_wall = time.time()

    def now(self) -> float:
        return time.monotonic() - self.t0_monotonic

    def from_wall(self, unix_time: float) -> float:
        return unix_time - self.t0_wall


Subscriber = Callable[[Event], None]


class Announcement(Protocol):
    """An event of faultlab's vocabulary (faultlab.vocabulary): its name and fields."""

    @property
    def name(self) -> str: ...
    def fields(self) -> dict[str, Any]: ...


class EventBus:
    """Stamps, redacts, records and fans out events; the single writer of `events.jsonl`."""

    def __init__(self, clock: RunClock, path: Path | None = None) -> None:
        self.clock = clock
        remember_env_secrets()
        self.events: list[Event] = []
        self._subscribers: list[Subscriber] = []
        self._file: IO[str] | None = open_private(path, "w") if path else None

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def emit(self, source: str, name: str, /, **fields: Any) -> Event:
        """Record an event happening now."""
        return self.record(source, name, None, fields)

    def announce(self, source: str, what: Announcement) -> Event:
        """Record an event of the vocabulary happening now."""
        return self.record(source, what.name, None, what.fields())

    def record(self, source: str, name: str, t: float | None, fields: Mapping[str, Any]) -> Event:
        """Record an event that happened at run time `t` (now when None)."""
        event = Event(self.clock.now() if t is None else t, source, name, redact(fields))
        self.events.append(event)
        if self._file is not None:
            self._file.write(event.to_json() + "\n")
            self._file.flush()
        for subscriber in list(self._subscribers):
            subscriber(event)
        return event

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# What the run's log writes around an event's fields (Event.to_json): no field may take them.
BUS_FIELDS = ("t", "source")


class LineTail(ABC):
    """The lines another process appends to a file, read as they arrive: `read_new` gives the
    events of those read since it was last called (`source`'s)."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source
        self._offset = 0
        self._partial = b""

    def new_lines(self) -> Iterator[bytes]:
        """Every complete line added since the last call (a line being written is held back
        until its newline arrives)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        yield from lines

    @abstractmethod
    def read_new(self) -> Iterator[dict[str, Any]]:
        """The events of the lines added since the last call, each a dict with its `event`."""


class EventFileTail(LineTail):
    """The JSON lines of events another process appends to a file (`FAULTLAB_EVENTS`)."""

    def read_new(self) -> Iterator[dict[str, Any]]:
        """Every complete line added since the last call, parsed; a bad line becomes `bad_line`."""
        for raw in self.new_lines():
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
                if not isinstance(data, dict) or not isinstance(data.get("event"), str):
                    raise ValueError("not an object with an 'event' name")
                if taken := [name for name in BUS_FIELDS if name in data]:
                    raise ValueError(f"a field named {taken[0]!r}, which the run's log gives "
                                     "every event (its time, its process)")
            except ValueError as exc:
                yield {"event": "bad_line", "line": raw[:200].decode(errors="replace"),
                       "error": str(exc)}
                continue
            yield data


class EventWriter:
    """What a client or peer uses to append its events to `FAULTLAB_EVENTS` (one line per write)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        target = path if path is not None else os.environ.get("FAULTLAB_EVENTS")
        remember_env_secrets()
        # O_APPEND makes every line one atomic write, even with several writers on one file.
        self._fd = (
            os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE) if target else None
        )

    def emit(self, event: str, /, **fields: Any) -> None:
        self.emit_at(time.time(), event, **fields)

    def emit_at(self, ts: float, event: str, /, **fields: Any) -> None:
        """An event that happened at Unix time `ts` (a browser's own stamp, say), not now."""
        if self._fd is None:
            return
        line = json.dumps({"event": event, "ts": ts, **redact(fields)}, default=json_default)
        os.write(self._fd, (line + "\n").encode())

    def announce(self, what: Announcement) -> None:
        self.emit(what.name, **what.fields())

    def announce_at(self, ts: float, what: Announcement) -> None:
        self.emit_at(ts, what.name, **what.fields())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
