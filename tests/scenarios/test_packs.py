"""Scenario packs: a pack outside the core registers an expectation and a suite column by being
imported; the core names no scenario's words."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from faultlab.errors import ProfileError
from faultlab.events import Event
from faultlab.expect import EXPECTATIONS, Expectation, Outcome, RunFacts, evaluate
from faultlab.expect.registry import register
from faultlab.profile import parse_profile
from faultlab.report import registry
from faultlab.report.record import RunRecord
from faultlab.report.suite import register_column, render_suite
from faultlab.report.summary import render_summary
from faultlab.result import RunResult

from ..conftest import REPO

PACK = "tests.scenarios.greeting"
GREETED = "name: greet\nclient: {command: [x]}\nexpect:\n  - {greeted: true}\n"
PLAIN = parse_profile("name: greet\nclient: {command: [x]}\n")


@pytest.fixture
def load_pack() -> Iterator[Callable[[], ModuleType]]:
    """Imports the tiny pack afresh on demand; afterwards every registry is as it was before."""
    expectations, columns = dict(EXPECTATIONS), dict(registry.COLUMNS)
    summary_events = list(registry.SUMMARY_EVENTS)
    sys.modules.pop(PACK, None)
    yield lambda: importlib.import_module(PACK)
    sys.modules.pop(PACK, None)
    EXPECTATIONS.clear()
    EXPECTATIONS.update(expectations)
    registry.COLUMNS.clear()
    registry.COLUMNS.update(columns)
    registry.SUMMARY_EVENTS[:] = summary_events


def ev(t: float, name: str, **fields: Any) -> Event:
    return Event(t, "client", name, fields)


def run(*events: Event) -> RunResult:
    return RunResult(PLAIN, Path("."), datetime.now(), events=events,
                     outcomes=[Outcome("x", True, "")])


def test_a_packs_expectation_validates_once_the_pack_is_imported(
        load_pack: Callable[[], ModuleType]) -> None:
    """A profile naming the pack's expectation is refused before the pack is imported, then valid."""
    with pytest.raises(ProfileError, match=r"expect\[0\]"):
        parse_profile(GREETED)
    load_pack()
    (expectation,) = parse_profile(GREETED).expect
    assert expectation.describe() == "the user is greeted"


def test_a_packs_expectation_is_evaluated(load_pack: Callable[[], ModuleType]) -> None:
    """`evaluate` judges the pack's expectation on the run's events like any core one."""
    load_pack()
    expect = parse_profile(GREETED).expect
    (held,) = evaluate(expect, RunFacts([ev(1.0, "client.greeting")]))
    (failed,) = evaluate(expect, RunFacts([ev(1.0, "client.connected")]))
    assert (held.held, held.seen) == (True, "greeted")
    assert (failed.held, failed.seen) == (False, "no greeting")


def test_a_packs_column_and_note_appear_in_the_suite_table(
        load_pack: Callable[[], ModuleType]) -> None:
    """The pack's column comes at its rank, after every core and booking column, with its note."""
    load_pack()
    runs = [run(ev(1.0, "client.greeting")), run(), run(ev(2.0, "client.greeting"))]
    text = render_suite([RunRecord.of(r) for r in runs])
    header, _, row = [line for line in text.splitlines() if line.startswith("| ")]
    assert [c.strip() for c in header.split("|")[1:-1]] == [
        "scenario", "runs", "verdicts", "resumes refused", "detected", "resumed", "recovered",
        "bookings", "user told", "audio ratio", "greeted"]
    assert row.split("|")[-2].strip() == "2x yes, 1x no"
    assert "Greeted: client.greeting seen." in text


def test_a_second_expectation_under_a_taken_key_is_refused() -> None:
    """Registering another expectation that starts with `truthful` raises and changes nothing."""
    before = dict(EXPECTATIONS)
    with pytest.raises(RuntimeError, match="'truthful'"):
        @register
        class Impostor(Expectation):
            truthful: bool

            def describe(self) -> str:
                return "an impostor"

            def check(self, facts: RunFacts) -> Outcome:
                return self._outcome(True, "")
    assert before == EXPECTATIONS


def test_a_second_column_under_a_taken_heading_is_refused() -> None:
    """A column headed like a registered one raises and leaves the first in place."""
    before = dict(registry.COLUMNS)
    with pytest.raises(RuntimeError, match="'bookings'"):
        @register_column("bookings", rank=5, combine=registry.counts)
        def _again(events: Sequence[Event]) -> str:
            return ""
    assert before == registry.COLUMNS


def test_the_booking_pack_registers_its_kinds_columns_and_summary_events() -> None:
    """`truthful` and `bookings` validate, and the backend's events reach a run's summary."""
    profile = parse_profile("name: b\nclient: {command: [x]}\n"
                            "expect: [{truthful: true}, {bookings: 1}]\n")
    assert [type(e).__name__ for e in profile.expect] == ["Truthful", "Bookings"]
    summary = render_summary(run(ev(1.0, "backend.commit", booking="B1")))
    assert "| backend.commit | booking=B1 |" in summary


@pytest.mark.parametrize("folder", ["faultlab/expect", "faultlab/report"])
def test_the_core_names_no_scenario(folder: str) -> None:
    """The generic expectations and reports say nothing of bookings: the booking pack does."""
    for path in sorted((REPO / folder).glob("*.py")):
        assert "book" not in path.read_text(encoding="utf-8").lower(), path
