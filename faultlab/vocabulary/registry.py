"""Every record faultlab knows, by event name: the vocabulary's own modules' (`record_modules`,
imported when the vocabulary is first read) and those `register` adds (a scenario pack's, a
plugin's)."""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from faultlab.events import Event
from faultlab.vocabulary.base import Record

_registered: list[type[Record]] = []
_generation = 0  # bumped at each change of _registered
_cache: tuple[int, dict[str, type[Record]]] | None = None


def register(*records: type[Record]) -> None:
    """Add records of one's own (a pack's backend events, say) to the vocabulary."""
    global _generation
    _registered.extend(r for r in records if r not in _registered)
    _generation += 1


def unregister(*records: type[Record]) -> None:
    """Take registered records out again (a test's own)."""
    global _generation
    _registered[:] = [r for r in _registered if r not in records]
    _generation += 1


def declared_in(namespace: Iterable[object]) -> list[type[Record]]:
    """The records among these objects: the classes with a `NAME` of their own."""
    return [obj for obj in namespace
            if isinstance(obj, type) and issubclass(obj, Record) and "NAME" in vars(obj)]


def record_modules() -> list[ModuleType]:
    """The package's modules of records, imported now: the package imports none of them
    (tests/test_vocabulary.py holds this list to the package's)."""
    from faultlab.vocabulary import audio, browser, lab, run, server, session, webrtc

    return [audio, browser, lab, run, server, session, webrtc]


def own() -> list[type[Record]]:
    """The vocabulary's own records (its modules'), without those registered."""
    return [r for m in record_modules() for r in declared_in(vars(m).values())
            if r.__module__ == m.__name__]


def vocabulary() -> dict[str, type[Record]]:
    """Every known event name, to its record; two records of one name are a bug, named."""
    global _cache
    if _cache is not None and _cache[0] == _generation:
        return _cache[1]
    found: dict[str, type[Record]] = {}
    for record in (*own(), *_registered):
        for name in record.names():
            if found.setdefault(name, record) is not record:
                raise RuntimeError(f"two records of the event {name!r}: "
                                   f"{found[name].__qualname__} and {record.__qualname__}")
    _cache = (_generation, found)
    return found


def record_of(name: str) -> type[Record] | None:
    """The record of the event `name` (None: no record has it)."""
    return vocabulary().get(name)


def read(event: Event) -> Record | None:
    """The event as its record (None: no record has its name, or its fields are not the
    record's)."""
    record = record_of(event.name)
    return None if record is None else record.read(event)
