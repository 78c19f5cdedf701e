"""The suite's table, in the field study's style: per scenario, the runs, how they ended, and the
ranges of what was measured (from the first fault applied, the moment the path was hurt)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from faultlab.events import Event
from faultlab.expect.session import delivered_audio, user_told

if TYPE_CHECKING:
    from faultlab.result import RunResult

COLUMNS = ("scenario", "runs", "verdicts", "resumes refused", "detected", "resumed",
           "recovered", "bookings", "user told", "audio ratio")


# Events of other processes are stamped by their own clocks: a consequence may carry a time a
# hair before the fault's (the proxy reports an abort once done; the client saw it meanwhile).
CLOCK_SKEW_S = 0.05


def since_fault(events: Sequence[Event], name: str) -> float | None:
    """Seconds from the first fault applied to the first `name` event after it."""
    fault = next((e.t for e in events if e.name == "fault.applied"), None)
    if fault is None:
        return None
    return next((max(0.0, e.t - fault) for e in events
                 if e.name == name and e.t >= fault - CLOCK_SKEW_S), None)


def _span(values: Sequence[float | None], unit: str = " s") -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return "-"
    low, high = min(seen), max(seen)
    return f"{low:.2f}{unit}" if high - low < 0.005 else f"{low:.2f}-{high:.2f}{unit}"


def _counts(values: Sequence[str]) -> str:
    """One value when every run agrees, else each value with its count."""
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return ", ".join(f"{n}x {v}" for v, n in counts.most_common())


def _refusals(events: Sequence[Event]) -> str:
    codes = Counter(str(e.fields.get("code")) for e in events if e.name == "resume.refused")
    attempts = sum(1 for e in events if e.name == "resume.attempt")
    if not attempts:
        return "-"
    refused = " ".join(f"{n}x{code}" for code, n in sorted(codes.items()))
    return f"{sum(codes.values())}/{attempts}" + (f" ({refused})" if refused else "")


def _audio_ratio(events: Sequence[Event]) -> float | None:
    measured = delivered_audio(events)
    return None if measured is None else measured[0] / measured[1]


def _row(name: str, runs: Sequence[RunResult]) -> list[str]:
    observed = [r.observed for r in runs]

    def span(event: str) -> str:
        return _span([since_fault(events, event) for events in observed])

    def each(cell: Callable[[Sequence[Event]], str]) -> str:
        return _counts([cell(events) for events in observed])

    return [
        name, str(len(runs)),
        f"{sum(1 for r in runs if r.verdict == 'PASS')}/{len(runs)} PASS", each(_refusals),
        span("client.lost"), span("resume.ok"), span("client.recovered"),
        each(lambda ev: str(len({e.fields.get("booking") for e in ev if e.name == "backend.job"}))),
        each(lambda ev: user_told(ev)[0]),
        _span([_audio_ratio(events) for events in observed], ""),
    ]


def render_suite(results: Sequence[RunResult]) -> str:
    by_profile: dict[str, list[RunResult]] = {}
    for result in results:
        by_profile.setdefault(result.profile.name, []).append(result)
    rows = [_row(name, runs) for name, runs in by_profile.items()]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    passed = sum(1 for r in results if r.verdict == "PASS")
    return "\n".join([
        f"# faultlab suite: {passed} of {len(results)} runs passed", "",
        "Times are seconds from the first fault applied: detected (client.lost), resumed "
        "(resume.ok), recovered (the model's first output after the loss, client.recovered). "
        "Resumes refused: refused/attempts (close codes). Audio ratio: uplink audio seconds over "
        "wall seconds of the session.", "",
        line(COLUMNS), line(["-" * w for w in widths]), *(line(r) for r in rows), "",
    ])


def write_suite(results: Sequence[RunResult], path: Path) -> str:
    text = render_suite(results)
    path.write_text(text, encoding="utf-8")
    return text
