"""Scenario packs: a pack outside the core, installed as a pip package would be (a
`faultlab.scenarios` entry point), brings an expectation, a suite column and an emulator model;
the core names no scenario's words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from faultlab.emulator.brain import Mind
from faultlab.errors import ProfileError
from faultlab.events import Event
from faultlab.expect import EXPECTATIONS, Expectation, Outcome, RunFacts, evaluate
from faultlab.expect.registry import register
from faultlab.profile import parse_profile
from faultlab.report import registry
from faultlab.report.record import RunRecord
from faultlab.report.registry import register_column
from faultlab.report.suite import render_suite
from faultlab.report.summary import render_summary
from faultlab.result import RunResult
from faultlab.scenarios import PackError, ScenarioPack, brain_of, packs

from ..conftest import REPO, faultlab

PACK = "tests.scenarios.greeting"
GREETED = "name: greet\nclient: {command: [x]}\nexpect:\n  - {greeted: true}\n"
PLAIN = parse_profile("name: greet\nclient: {command: [x]}\n")
Install = Callable[..., dict[str, ScenarioPack]]


def write_dist(folder: Path, name: str, entry_points: str) -> Path:
    """What `pip install` leaves for a distribution: its metadata and its entry points."""
    dist = folder / f"{name}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[faultlab.scenarios]\n{entry_points}\n")
    return folder


@pytest.fixture
def install(tmp_path: Path) -> Iterator[Install]:
    """Installs a pack distribution on sys.path on demand (the greeting pack unless told) and
    loads the packs; afterwards every registry is as it was before."""
    expectations, columns = dict(EXPECTATIONS), dict(registry.COLUMNS)
    summary_events = list(registry.SUMMARY_EVENTS)
    added: list[str] = []

    def add(entry_points: str = f"greeting = {PACK}:PACK") -> dict[str, ScenarioPack]:
        folder = str(write_dist(tmp_path / f"site{len(added)}", "greeting-pack", entry_points))
        sys.path.insert(0, folder)
        added.append(folder)
        packs.cache_clear()
        return packs()

    sys.modules.pop(PACK, None)
    yield add
    for folder in added:
        sys.path.remove(folder)
    packs.cache_clear()
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


def test_a_packs_expectation_validates_once_the_pack_is_installed(install: Install) -> None:
    """A profile naming the pack's expectation is refused before the pack is installed, then
    valid; the installed packs are the built-in booking one and the new one."""
    with pytest.raises(ProfileError, match=r"expect\[0\]"):
        parse_profile(GREETED)
    assert sorted(install()) == ["booking", "greeting"]
    (expectation,) = parse_profile(GREETED).expect
    assert expectation.describe() == "the user is greeted"


def test_a_packs_expectation_is_evaluated(install: Install) -> None:
    """`evaluate` judges the pack's expectation on the run's events like any core one."""
    install()
    expect = parse_profile(GREETED).expect
    (held,) = evaluate(expect, RunFacts([ev(1.0, "client.greeting")]))
    (failed,) = evaluate(expect, RunFacts([ev(1.0, "client.connected")]))
    assert (held.held, held.seen) == (True, "greeted")
    assert (failed.held, failed.seen) == (False, "no greeting")


def test_a_packs_column_and_note_appear_in_the_suite_table(install: Install) -> None:
    """The pack's column comes at its rank, after every core and booking column, with its note."""
    install()
    runs = [run(ev(1.0, "client.greeting")), run(), run(ev(2.0, "client.greeting"))]
    text = render_suite([RunRecord.of(r) for r in runs])
    header, _, row = [line for line in text.splitlines() if line.startswith("| ")]
    assert [c.strip() for c in header.split("|")[1:-1]] == [
        "scenario", "runs", "verdicts", "resumes refused", "detected", "resumed", "recovered",
        "bookings", "user told", "audio ratio", "greeted"]
    assert row.split("|")[-2].strip() == "2x yes, 1x no"
    assert "Greeted: client.greeting seen." in text


def test_a_packs_model_answers_where_a_personality_names_its_scenario(install: Install) -> None:
    """`scenario: greeting` picks the pack's model; none picks the default (booking) one; an
    unknown scenario is refused with the installed ones named."""
    install()
    mind = Mind()
    mind.say([("user", "Hello there")])
    assert brain_of("greeting").on_turn(mind) is not None
    assert brain_of("greeting").on_turn(mind).speech == "Hello, nice to meet you!"  # type: ignore[union-attr]
    mind.say([("user", "Book me the 3pm slot tomorrow")])
    assert brain_of(None).on_turn(mind).speech == "I can't book slots in this session."  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="unknown scenario 'nope'; one of: booking, greeting"):
        brain_of("nope")


def test_a_pack_that_cannot_be_loaded_is_named(install: Install) -> None:
    """An entry point naming a missing module raises PackError naming the pack, not a traceback."""
    with pytest.raises(PackError, match=r"scenario pack broken \(tests.scenarios.nothing:PACK\)"):
        install("broken = tests.scenarios.nothing:PACK")


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


@pytest.mark.parametrize("folder", ["faultlab/expect", "faultlab/report", "faultlab/emulator",
                                    "faultlab/calibrate"])
def test_the_core_names_no_scenario(folder: str) -> None:
    """The generic expectations, reports, emulator and calibrate say nothing of bookings: the
    booking pack does."""
    for path in sorted((REPO / folder).glob("*.py")):
        assert "book" not in path.read_text(encoding="utf-8").lower(), path


@pytest.mark.lab
def test_a_run_uses_an_installed_packs_model_and_expectation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`faultlab run` with the greeting pack installed: the emulator answers with the pack's model
    (`overrides: {scenario: greeting}`), and the pack's expectation is judged (PASS), and fails
    where it should (without `scenario`, the default model only repeats the words)."""
    site = write_dist(tmp_path / "site", "greeting-pack", f"greeting = {PACK}:PACK")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    client = Path(__file__).with_name("greeting_client.py")
    results = {}
    for name, scenario in (("greeted", "greeting"), ("echoed", None)):
        overrides = f", overrides: {{scenario: {scenario}}}" if scenario else ""
        profile = tmp_path / f"{name}.yaml"
        profile.write_text(f"""\
name: {name}
target: {{emulator: {{time_scale: 0.1{overrides}}}}}
client:
  command: [{sys.executable}, {client}]
  env: {{GOOGLE_API_KEY: not-a-real-key}}
expect:
  - {{greeted: true}}
timeout: 30s
""")
        done = faultlab("run", "-q", "--runs-dir", str(tmp_path / "runs"), str(profile))
        results[name] = done
    assert results["greeted"].returncode == 0, results["greeted"].stdout + results["greeted"].stderr
    assert results["echoed"].returncode != 0, results["echoed"].stdout
    (greeted,) = (tmp_path / "runs").glob("*-greeted")
    record = json.loads((greeted / "result.json").read_text())
    assert record["expectations"][0] == {"expectation": "the user is greeted", "held": True,
                                         "seen": "greeted", "at": None}
    assert record["cells"]["greeted"] == "yes"
    (echoed,) = (tmp_path / "runs").glob("*-echoed")
    replies = [json.loads(line) for line in (echoed / "events.jsonl").read_text().splitlines()
               if '"client.reply"' in line]
    assert [r["text"] for r in replies] == ["You said: Hello there"]


def test_an_install_without_entry_points_still_has_the_booking_pack(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata without faultlab.scenarios entry points (an install older than packs): faultlab's
    own booking pack is loaded all the same, and is the default scenario's model."""
    import faultlab.plugins as plugins

    monkeypatch.setattr(plugins, "entry_points", lambda group: ())
    packs.cache_clear()
    try:
        assert list(packs()) == ["booking"]
        assert brain_of(None) is not None
    finally:
        monkeypatch.undo()
        packs.cache_clear()


def test_a_reference_client_loads_its_conversation_without_the_packs_expectations() -> None:
    """The booking pack's clients import its conversation, not the pack: its expectations import
    faultlab's expectation models and pydantic, 0.1 s of an OpenAI or Node client's start."""
    clients = sorted(set(packs()["booking"].clients.values()))
    assert "faultlab.clients.naive" in clients
    code = ("import importlib, json, sys\n"
            f"for name in {clients!r}:\n    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('faultlab.expect') "
            "or m in ('faultlab.scenarios.booking.expectations', 'faultlab.scenarios.booking.pack'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
