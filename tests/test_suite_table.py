"""The suite table: one row per scenario over its runs, outcomes counted, latencies as ranges."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from faultlab.events import Event
from faultlab.expect import Outcome
from faultlab.profile import parse_profile
from faultlab.report.record import RunRecord
from faultlab.report.suite import render_suite
from faultlab.result import RunResult

PROFILE = parse_profile("name: field-X\nclient: {command: [x]}\n")


def ev(t: float, name: str, **fields: Any) -> Event:
    return Event(t, "client", name, fields)


def result(lost: float, resumed: float | None, held: bool = True) -> RunResult:
    events = [ev(1.0, "fault.applied"), ev(1.0 + lost, "client.lost"),
              ev(3.0, "resume.attempt"), ev(3.5, "resume.refused", code=1011),
              ev(4.0, "resume.attempt"), ev(5.0, "backend.job", booking="B1"),
              ev(6.0, "backend.commit", booking="B1")]
    if resumed is not None:
        events += [ev(1.0 + resumed, "resume.ok"), ev(1.0 + resumed + 1, "client.recovered"),
                   ev(9.0, "client.ask"), ev(9.5, "client.answer", text="Yes, it's booked.")]
    run = RunResult(PROFILE, Path("."), datetime.now(), events=events,
                    outcomes=[Outcome("x", held, "")])
    return run


def test_rows_count_outcomes_and_give_ranges() -> None:
    text = render_suite([RunRecord.of(r) for r in (result(1.6, 2.2), result(1.9, 2.4),
                                                   result(1.7, None, held=False))])
    assert "# faultlab suite: 2 of 3 runs passed" in text
    (row,) = [line for line in text.splitlines() if line.startswith("| field-X")]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells == ["field-X", "3", "2/3 PASS", "1/2 (1x1011)", "1.60-1.90 s", "2.20-2.40 s",
                     "3.20-3.40 s", "1", "2x truth, 1x never told", "-"]
