"""Where the suite table's columns and the summary's extra events are registered, by the core
(faultlab.report.columns) and by scenario packs alike.

A leaf module (it imports no expectation, report or pack), so a pack can import it while
`faultlab.expect` is still loading the packs; faultlab.report.columns reads it, with the core's
columns and every pack loaded. A column's place is its `rank`, lowest first after scenario, runs
and verdicts; the core's columns take 10 (resumes refused), 20 (detected), 30 (resumed),
40 (recovered) and 90 (audio ratio).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from faultlab.events import Event

type Cell[T] = Callable[[Sequence[Event]], T]


@dataclass(frozen=True)
class Column[T]:
    """A column of the suite table: its heading, its cell for one run's observed events, how the
    cells of a scenario's runs combine into one (`counts`, `span`), its place, and an optional
    sentence for the table's legend."""

    heading: str
    rank: float
    cell: Cell[T]
    combine: Callable[[Sequence[T]], str]
    note: str = ""


COLUMNS: dict[str, Column[Any]] = {}
# Event names, or prefixes ending in ".", that a pack wants in the summary's timeline.
SUMMARY_EVENTS: list[str] = []


def register_column[T](heading: str, *, rank: float, combine: Callable[[Sequence[T]], str],
                       note: str = "") -> Callable[[Cell[T]], Cell[T]]:
    """Function decorator: the function gives one run's cell of a new suite-table column."""

    def add(cell: Cell[T]) -> Cell[T]:
        if heading in COLUMNS:
            raise RuntimeError(f"two suite columns are headed {heading!r}")
        COLUMNS[heading] = Column(heading, rank, cell, combine, note)
        return cell

    return add


def register_summary_events(*names: str) -> None:
    """Show these events (a name, or a prefix ending in ".") in every run summary's timeline."""
    SUMMARY_EVENTS.extend(n for n in names if n not in SUMMARY_EVENTS)


def counts(cells: Sequence[str | None]) -> str:
    """One value when every run agrees, else each value with its count ("-": a run without
    one)."""
    tally = Counter("-" if c is None else c for c in cells)
    if len(tally) == 1:
        return next(iter(tally))
    return ", ".join(f"{n}x {v}" for v, n in tally.most_common())


def span(values: Sequence[float | None], unit: str = " s") -> str:
    """The range of the measured values (a run without one does not count); "-" if none has one."""
    seen = [v for v in values if v is not None]
    if not seen:
        return "-"
    low, high = min(seen), max(seen)
    return f"{low:.2f}{unit}" if high - low < 0.005 else f"{low:.2f}-{high:.2f}{unit}"
