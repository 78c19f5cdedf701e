"""faultlab explore's phases against a stand-in for the lab (a rule that says which schedules
fail), so that every decision is checked exactly: finding, refining, shrinking and confirming
failures, the journal, shards and resuming. tests/lab/test_explore_lab.py explores real runs."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from faultlab.errors import LabError
from faultlab.explore import result
from faultlab.explore.exploration import BASE_PROFILE, Budget, Exploration
from faultlab.explore.journal import JOURNAL, Journal, JournalError, merged
from faultlab.explore.space import Boundaries, Placement, Point, Space, boundaries
from faultlab.jobs import RunOptions
from faultlab.profile import Profile, parse_profile
from faultlab.report.record import RunRecord

from ..conftest import REPO
from .session import BASE, GEMINI, SESSION, timed


class StandIn:
    """Runs a point's profile by a rule: a drop within 1.2 s after the tool call or the first
    turn end leaves the user untold; a drop after setup loses the booking; anything else, or a
    close, passes. Writes a run folder with the unhurt session's frames."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self.profiles: list[str] = []

    async def __call__(self, profile: Profile) -> RunRecord:
        self.profiles.append(profile.name)
        run_dir = self.runs_dir / f"{profile.name}.{len(self.profiles)}"
        run_dir.mkdir(parents=True)
        (run_dir / "events.jsonl").write_text("".join(
            json.dumps({"t": i * 0.1, "source": "target", "event": "emulator.frame",
                        "from": sender, "conn": 1, "kind": kind, "bytes": 10}) + "\n"
            for i, (sender, kind) in enumerate(SESSION)))
        failed = self.failed(profile)
        return RunRecord(profile=profile.name, verdict="FAIL" if failed else "PASS",
                         exit_code=1 if failed else 0, run_dir=str(run_dir), started="",
                         duration_s=1.0,
                         expectations=[{"expectation": e, "held": False, "seen": None,
                                        "at": None} for e in failed])

    @staticmethod
    def failed(profile: Profile) -> list[str]:
        out: set[str] = set()
        for step in profile.timeline:
            frame = step.when.frame
            if step.fault != "drop" or frame is None:
                continue
            if frame.kind == "setup_complete":
                out.add("the backend holds 1 booking(s)")
            elif step.after < 1.2 and (frame.kind == "tool_call" or (
                    frame.kind == "server_content.turn_complete" and frame.nth == 1)):
                out.add("the user is told the truth")
        return sorted(out)


SPACE = {"faults": [{"fault": "drop", "connection": "first"}, {"fault": "close", "code": 1000}],
         "after": ["0s", "1s", "2s"], "refine": "100ms", "confirm": 2}


def exploration(folder: Path, space_fields: dict[str, Any] = SPACE,
                shard: tuple[int, int] | None = None, budget: Budget | None = None,
                stand_in: StandIn | None = None, text: str = BASE) -> Exploration:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BASE_PROFILE).write_text(text)
    return Exploration(folder, text, Space.model_validate(space_fields), 2, RunOptions(),
                       lambda line: None, True, budget or Budget(), shard,
                       stand_in or StandIn(folder / "runs"))


def explored(e: Exploration) -> dict[str, Any]:
    asyncio.run(e.run())
    data = result.write(e, e.budget.spent_why)
    return data


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    """explore.json without where the runs were made."""
    return {k: v for k, v in data.items() if k != "runs"}


def test_an_exploration_finds_each_failure_refines_it_and_shrinks_it(tmp_path: Path) -> None:
    e = exploration(tmp_path / "x")
    data = explored(e)
    assert data["complete"] and data["unhurt"]["outcome"] == "pass"
    assert len(data["boundaries"]) == 5
    outcomes = {p["key"]: p["outcome"] for p in data["points"]}
    assert outcomes["b1+0s/f0/end"].startswith("fail")
    assert outcomes["b1+0s/f1/end"] == "pass"  # a close: passes everywhere
    # The edge between 1 s (fails) and 2 s (passes) after the tool call, to 100 ms.
    refined = sorted(float(k.split("+")[1].split("s")[0]) for k in outcomes
                     if k.startswith("b1+") and k.endswith("/f0/end"))
    assert any(1.1 <= r <= 1.3 for r in refined) and len(refined) > 3
    failures = {f["outcome"]: f for f in data["failures"]}
    assert set(failures) == {"fail: the backend holds 1 booking(s)",
                             "fail: the user is told the truth"}
    untold = failures["fail: the user is told the truth"]
    assert untold["minimal"]["key"] == "b1+0s/f0/end"  # earliest trigger, simplest fault
    assert untold["confirmed"] == "2 of 2" and not untold["flaky"]
    minimal = tmp_path / "x" / untold["profile"]
    profile = parse_profile(minimal.read_text(), str(minimal))
    assert profile.explore is None and [s.fault for s in profile.timeline] == ["drop"]
    assert "Confirmed: failed 2 of 2 runs." in minimal.read_text()
    assert (tmp_path / "x" / "explore.html").read_text().count('class="fail"') >= 2


class Slow(StandIn):
    """A stand-in whose runs take turns of the event loop (1, 2 or 3 in rotation: no clock, so
    the same overlaps every time), so that measurements overlap: how many ran at once, and
    which points were in flight together."""

    def __init__(self, runs_dir: Path) -> None:
        super().__init__(runs_dir)
        self.running: list[str] = []
        self.most = self.started = 0
        self.together: set[tuple[str, ...]] = set()

    async def __call__(self, profile: Profile) -> RunRecord:
        self.running.append(profile.name)
        self.most = max(self.most, len(self.running))
        self.together.add(tuple(sorted(self.running)))
        self.started += 1
        for _ in range(1 + self.started % 3):
            await asyncio.sleep(0)
        self.running.remove(profile.name)
        return await super().__call__(profile)


def test_failures_are_shrunk_and_confirmed_at_once_within_the_jobs(tmp_path: Path) -> None:
    """The two findings' shrinking and confirmations share the jobs (2): runs of both are in
    flight together, never more than 2, no point runs twice but a confirmation, and the result
    is that of runs that never overlap."""
    slow = Slow(tmp_path / "x" / "runs")
    data = explored(exploration(tmp_path / "x", stand_in=slow))
    assert slow.most == 2
    minimal = {f["minimal"]["id"] for f in data["failures"]}
    assert len(minimal) == 2
    assert any(all(m in " ".join(names) for m in minimal) for names in slow.together)
    assert len(slow.profiles) == len(set(slow.profiles)) + 2 * 2
    assert comparable(data) == comparable(explored(exploration(tmp_path / "y")))


def test_a_point_two_measurements_want_runs_once_and_a_cancelled_waiter_stops_nothing(
        tmp_path: Path) -> None:
    """A point one measurement runs is awaited by the others that want it, not run again; one
    of those cancelled (Ctrl-C reaching one finding's shrinking) leaves the run to its owner."""
    slow = Slow(tmp_path / "x" / "runs")
    e = exploration(tmp_path / "x", stand_in=slow)

    async def measured_at_once() -> tuple[list[Any], list[Any], bool]:
        await e._baseline()
        item = [(e._grid()[0], "grid", 0)]
        owner = asyncio.create_task(e._measure(item))
        await asyncio.sleep(0)  # the owner takes the item
        waiter, other = (asyncio.create_task(e._measure(item)) for _ in range(2))
        await asyncio.sleep(0)
        waiter.cancel()
        got, also = await owner, await other
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return got, also, waiter.cancelled()

    got, also, cancelled = asyncio.run(measured_at_once())
    assert len(got) == 1 and also == [] and cancelled
    assert len(slow.profiles) == 2  # the unhurt run and the point, once


def test_an_error_while_the_failures_are_confirmed_reaches_the_command_as_itself(
        tmp_path: Path) -> None:
    """Confirming both failures at once (as shrinking them), one's error is raised as it is
    (the command tells a FaultlabError in a line), not inside an ExceptionGroup."""
    class Broken(StandIn):
        async def __call__(self, profile: Profile) -> RunRecord:
            if e.phase == "confirm":
                raise LabError("the lab broke")
            return await super().__call__(profile)

    e = exploration(tmp_path / "x", stand_in=Broken(tmp_path / "x" / "runs"))
    with pytest.raises(LabError, match="the lab broke"):
        asyncio.run(e.run())


def test_two_shards_merged_give_what_one_exploration_gives(tmp_path: Path) -> None:
    whole = explored(exploration(tmp_path / "whole"))
    shards = [exploration(tmp_path / f"shard{k}", shard=(k, 2)) for k in (1, 2)]
    for shard in shards:
        data = explored(shard)
        assert data["shard"] is not None and not data["failures"]
    out = tmp_path / "merged"
    out.mkdir()
    (out / BASE_PROFILE).write_text(BASE)
    merged([s.journal for s in shards], out / JOURNAL)
    again = explored(exploration(out))
    assert comparable(again) == comparable(whole)


def test_shards_of_different_explorations_are_not_merged(tmp_path: Path) -> None:
    a = exploration(tmp_path / "a", shard=(1, 2))
    b = exploration(tmp_path / "b", {**SPACE, "seed": 9}, shard=(2, 2))
    explored(a)
    explored(b)
    with pytest.raises(JournalError, match="the explore block differ"):
        merged([a.journal, b.journal], tmp_path / "m.jsonl")


def test_a_budget_stops_it_and_it_goes_on_where_it_stopped(tmp_path: Path) -> None:
    stand_in = StandIn(tmp_path / "x" / "runs")
    first = explored(exploration(tmp_path / "x", budget=Budget(runs=7), stand_in=stand_in))
    assert not first["complete"] and first["stopped"] == "the budget of 7 runs reached"
    assert len(stand_in.profiles) == 7
    # Resumed: nothing measured is run again, and the result is the uninterrupted one's.
    resumed = explored(exploration(tmp_path / "x", stand_in=stand_in))
    # Only confirmations repeat a profile: two findings, each rerun twice.
    assert len(stand_in.profiles) == len(set(stand_in.profiles)) + 2 * 2
    whole = explored(exploration(tmp_path / "y"))
    assert comparable(resumed) == comparable(whole)


def test_a_journal_line_cut_by_a_crash_is_measured_again(tmp_path: Path) -> None:
    e = exploration(tmp_path / "x", budget=Budget(runs=4))
    explored(e)
    path = tmp_path / "x" / JOURNAL
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])
    assert len(Journal.load(path).runs) == len(lines) - 2
    path.write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    with pytest.raises(JournalError, match=f"{path}:2: not an exploration journal line"):
        Journal.load(path)


def test_an_unhurt_run_that_fails_ends_the_exploration(tmp_path: Path) -> None:
    text = BASE + "timeline:\n  - {when: {frame: {from: server, kind: setup_complete}}, do: {fault: drop}}\n"
    stand_in = StandIn(tmp_path / "x" / "runs")
    data = explored(exploration(tmp_path / "x", stand_in=stand_in, text=text))
    assert data["unhurt"]["outcome"] == "fail: the backend holds 1 booking(s)"
    assert data["points"] == [] and len(stand_in.profiles) == 1


def test_a_profile_that_replays_a_cassette_is_explored_from_its_own_folder(tmp_path: Path) -> None:
    from faultlab.explore.exploration import ORIGIN

    shipped = REPO / "profiles" / "cassettes" / "R0.yaml"
    text = shipped.read_text()
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / ORIGIN).write_text(f"{shipped}\n")
    e = exploration(folder, text=text)
    e.found = boundaries(timed(SESSION), Boundaries(), GEMINI.kind_matches)
    profile = e._profile(Point((Placement(1, 0.0, 0, None),)))
    assert profile.path is not None and profile.path.parent == folder / "points"
    assert profile.target is not None and profile.target.cassette is not None
    assert profile.target.cassette.file == shipped.parent / "R0.cassette.jsonl"


class EdgeStandIn(StandIn):
    """As StandIn, but the drop right at the tool call fails only on its first run (a window's
    edge, where timing decides)."""

    def failed(self, profile: Profile) -> list[str]:
        edge = [s for s in profile.timeline if s.when.frame is not None
                and s.when.frame.kind == "tool_call" and s.after == 0 and s.fault == "drop"]
        if edge and self.profiles.count(profile.name) > 1:
            return []
        return StandIn.failed(profile)


def test_a_flaky_minimal_gives_way_to_the_next_point_that_fails_every_time(
        tmp_path: Path) -> None:
    stand_in = EdgeStandIn(tmp_path / "x" / "runs")
    data = explored(exploration(tmp_path / "x", stand_in=stand_in))
    untold = next(f for f in data["failures"] if f["outcome"] == "fail: the user is told the truth")
    assert untold["confirmed"] == "2 of 2" and not untold["flaky"]
    # The next simplest grid point that failed so: the drop right at the first turn's end.
    assert untold["minimal"]["key"] == "b2+0s/f0/end"
    assert data["runs"]["b1+0s/f0/end"][1:] != []  # the edge was rerun, and failed only once


def test_a_bad_space_on_the_command_line_is_refused_before_anything_is_made(
        tmp_path: Path) -> None:
    from click.testing import CliRunner

    from faultlab.cli import cli

    out = tmp_path / "x"
    done = CliRunner().invoke(cli, ["explore", "explore/booking-naive", "--out", str(out),
                                    "--space", "{faults: [{fault: drop, direction: sideways}]}"])
    assert done.exit_code == 2, done.output
    assert "--space:1: explore.faults[0].direction" in done.output
    assert not out.exists()
