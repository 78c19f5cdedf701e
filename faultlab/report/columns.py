"""The suite table's columns: the Live API's (here, registered like a pack's), and `columns()`,
every registered one in table order with the core's and every installed pack's loaded.

Not in faultlab.report.suite, which draws the table from run records: the records take their cells
from here, and an import back would close a circle (record -> columns -> suite -> record).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from faultlab.events import Event
from faultlab.expect.session import delivered_audio
from faultlab.report.registry import COLUMNS, SUMMARY_EVENTS, Column, counts, register_column, span
from faultlab.scenarios import packs
from faultlab.vocabulary import Record
from faultlab.vocabulary.run import fault_spans
from faultlab.vocabulary.session import ClientLost, ClientRecovered, ResumeAttempt, ResumeOk, ResumeRefused

# Events of other processes are stamped by their own clocks: a consequence may carry a time a
# hair before the fault's (the proxy reports an abort once done; the client saw it meanwhile).
CLOCK_SKEW_S = 0.05


def since_fault(events: Sequence[Event], record: type[Record]) -> float | None:
    """Seconds from the first fault applied to the first event of `record` after it."""
    spans = fault_spans(events)
    if not spans:
        return None
    fault = spans[0].t
    return next((max(0.0, e.t - fault) for e in events
                 if record.is_one(e) and e.t >= fault - CLOCK_SKEW_S), None)


@register_column("resumes refused", rank=10, combine=counts)
def _refusals(events: Sequence[Event]) -> str:
    codes = Counter(str(e.fields.get("code")) for e in events if ResumeRefused.is_one(e))
    attempts = sum(1 for e in events if ResumeAttempt.is_one(e))
    if not attempts:
        return "-"
    refused = " ".join(f"{n}x{code}" for code, n in sorted(codes.items()))
    return f"{sum(codes.values())}/{attempts}" + (f" ({refused})" if refused else "")


@register_column("detected", rank=20, combine=span)
def _detected(events: Sequence[Event]) -> float | None:
    return since_fault(events, ClientLost)


@register_column("resumed", rank=30, combine=span)
def _resumed(events: Sequence[Event]) -> float | None:
    return since_fault(events, ResumeOk)


@register_column("recovered", rank=40, combine=span)
def _recovered(events: Sequence[Event]) -> float | None:
    return since_fault(events, ClientRecovered)


def _ratio_span(values: Sequence[float | None]) -> str:
    return span(values, unit="")


@register_column("audio ratio", rank=90, combine=_ratio_span)
def _audio_ratio(events: Sequence[Event]) -> float | None:
    measured = delivered_audio(events)
    return None if measured is None else measured[0] / measured[1]


def columns() -> list[Column[Any]]:
    """Every registered column, in table order: the core's and the packs'. A run's result.json
    takes every cell, whether or not it drew a table."""
    packs()
    return sorted(COLUMNS.values(), key=lambda c: (c.rank, c.heading))


def summary_events() -> tuple[str, ...]:
    """The event names and prefixes the packs registered for the summary."""
    packs()
    return tuple(SUMMARY_EVENTS)
