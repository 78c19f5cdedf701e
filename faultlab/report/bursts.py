"""Repeated events as one: an audio stream, a model turn's chunks, a keep-alive collapse into a
`Burst` spanning them, with their count and audio seconds. The one collapsing rule, used by the
sequence diagram (faultlab.report.sequence) and summary.md's timeline alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from faultlab.events import Event

# Alike events this close together (seconds) are one burst: audio chunks come every 20-100 ms, a
# model turn's chunks every ~20 ms; a pause of a second is a new utterance.
BURST_GAP_S = 1.0
BURST_MIN = 3  # two alike events stay two items: a pair is still readable one by one
# Fields that measure an event rather than say what it is: alike events differ in them.
MEASURED = ("bytes", "audio_s")


def seconds(value: object) -> float:
    """A field's seconds, or 0 for what is not a finite number (a client writes what it likes)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def _frozen(value: object) -> Hashable:
    return value if isinstance(value, str | int | float | bool | None) else json.dumps(
        value, sort_keys=True, default=str)


def alike(event: Event) -> Hashable:
    """What makes events alike: the same source, name and fields, but for what each measures."""
    return (event.source, event.name, *sorted(
        (k, _frozen(v)) for k, v in event.fields.items() if k not in MEASURED))


@dataclass(frozen=True)
class Burst:
    """Alike events in a row (`BURST_GAP_S` apart at most), or one event alone."""

    events: tuple[Event, ...]

    @property
    def first(self) -> Event:
        return self.events[0]

    @property
    def last(self) -> Event:
        return self.events[-1]

    @property
    def count(self) -> int:
        return len(self.events)

    @property
    def audio_s(self) -> float:
        return sum(seconds(e.fields.get("audio_s")) for e in self.events)

    @property
    def fields(self) -> dict[str, Any]:
        """The first event's fields; a burst's measures are its sum (`audio_s`), not the first's."""
        hidden = ("argv",) if self.count == 1 else ("argv", *MEASURED)
        return {k: v for k, v in self.first.fields.items() if k not in hidden}


def bursts(events: Iterable[Event]) -> list[Burst]:
    """`events` (in time order) with each burst of at least `BURST_MIN` alike ones (`alike`, each
    within `BURST_GAP_S` of the one before) made one; other events interleave freely. In the
    order of each burst's first event."""
    open_bursts: dict[Hashable, list[Event]] = {}
    done: list[list[Event]] = []
    for event in events:
        key = alike(event)
        burst = open_bursts.get(key)
        if burst is not None and event.t - burst[-1].t <= BURST_GAP_S:
            burst.append(event)
            continue
        if burst is not None:
            done.append(burst)
        open_bursts[key] = [event]
    done.extend(open_bursts.values())
    out: list[Burst] = []
    for burst in done:
        if len(burst) >= BURST_MIN:
            out.append(Burst(tuple(burst)))
        else:
            out.extend(Burst((e,)) for e in burst)
    return sorted(out, key=lambda b: (b.first.t, b.first.name))
