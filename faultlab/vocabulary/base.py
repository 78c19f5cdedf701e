"""The base of every typed event record: its name, its fields, how it is read back from an
`Event`, and how the report draws it (`Drawing`)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from faultlab.events import Event

Sender = Literal["client", "server"]
# The lanes of a run's sequence diagram (faultlab.report.sequence), left to right.
Lane = Literal["client", "proxy", "router", "server"]
# A field's type and its default as the JSONL writes it (`...`: required), for the schema.
WireField = tuple[Any, Any]


@dataclass(frozen=True)
class Drawing:
    """How the report draws a record's events: a mark on `lane`, coloured as `category` (a key of
    the report's palette; "note": grey), or no mark at all when `lane` is None. Repeats of one
    event collapse into one span either way (faultlab.report.bursts)."""

    lane: Lane | None = None
    category: str = "note"


NOT_DRAWN = Drawing()


@dataclass(frozen=True)
class Gauge:
    """A measure the report plots over the run's clock from a record's events (report.html's
    strips under the lanes): `name`, the strip's label, in `unit`."""

    name: str
    unit: str


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Record:
    """An event of faultlab's vocabulary: its name, and its fields as dataclass fields (a field
    that is None is not written, but for those in `ALWAYS`). `WIRE_NAMES` renames a field in the
    JSONL (`tool` is written `name`, which is the record's own); `DRAWN`: how the report draws it
    (by default, not); `PLOTTED`: the gauges its events are readings of (`readings`)."""

    NAME: ClassVar[str]
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {}
    # Fields whose entries are written as the event's own (FaultApplied's details).
    SPREAD: ClassVar[frozenset[str]] = frozenset()
    # Fields written even when None (null: a close without a code, a page socket not yet known).
    ALWAYS: ClassVar[frozenset[str]] = frozenset()
    DRAWN: ClassVar[Drawing] = NOT_DRAWN
    PLOTTED: ClassVar[tuple[Gauge, ...]] = ()

    @property
    def name(self) -> str:
        return self.NAME

    def fields(self) -> dict[str, Any]:
        return {self.WIRE_NAMES.get(f.name, f.name): getattr(self, f.name)
                for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if getattr(self, f.name) is not None or f.name in self.ALWAYS}

    def drawing(self) -> Drawing:
        """How the report draws this event (a record may choose by its fields)."""
        return self.DRAWN

    def label(self) -> str | None:
        """The text beside its mark, when more than its name says (None: the name)."""
        return None

    def readings(self, before: Self | None) -> dict[str, float]:
        """Its value of each of `PLOTTED`'s gauges, by name; `before`: the same source's previous
        event of this record, if any (for a reading that is a difference of counters)."""
        return {}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The event names this record is read from."""
        return (cls.NAME,)

    @classmethod
    def is_one(cls, event: Event) -> bool:
        """Whether `event` has this record's name (whatever its fields: what reads only that an
        event happened, and when, holds a client of one's own that writes fewer to it too)."""
        return event.name in cls.names()

    @classmethod
    def read(cls, event: Event) -> Self | None:
        """This record, if `event` is one (None for any other event, or one whose fields are
        not this record's: another process wrote it)."""
        if event.name not in cls.names():
            return None
        try:
            return cls.parse(event.fields)
        except TypeError:
            return None

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        wire = {f.name: cls.WIRE_NAMES.get(f.name, f.name)
                for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{own: data.get(key) for own, key in wire.items() if key in data})

    @classmethod
    def all(cls, events: Iterable[Event]) -> list[tuple[Event, Self]]:
        """Every event of this record, with the record."""
        return [(e, r) for e in events if (r := cls.read(e)) is not None]

    @classmethod
    def wire_fields(cls) -> dict[str, WireField]:
        """The fields as the JSONL writes them, with their types: what `faultlab events schema`
        declares and `faultlab events check` holds an event to (a field of another name is
        allowed: a record with a `dict` of its own, FaultApplied's details say, spreads it)."""
        hints = typing.get_type_hints(cls)
        out: dict[str, WireField] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in cls.SPREAD:
                continue
            required = f.default is dataclasses.MISSING \
                and f.default_factory is dataclasses.MISSING
            out[cls.WIRE_NAMES.get(f.name, f.name)] = (hints[f.name], ... if required else None)
        return out
