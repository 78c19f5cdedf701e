"""The base of every typed event record: its name, its fields, and how it is read back from an
`Event`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, Self

from faultlab.events import Event

Sender = Literal["client", "server"]


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Record:
    """An event of faultlab's vocabulary: its name, and its fields as dataclass fields (a field
    that is None is not written)."""

    NAME: ClassVar[str]

    @property
    def name(self) -> str:
        return self.NAME

    def fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if getattr(self, f.name) is not None}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The event names this record is read from."""
        return (cls.NAME,)

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
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                      if f.name in data})

    @classmethod
    def all(cls, events: Iterable[Event]) -> list[tuple[Event, Self]]:
        """Every event of this record, with the record."""
        return [(e, r) for e in events if (r := cls.read(e)) is not None]


