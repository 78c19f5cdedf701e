"""faultlab explore's logic: the space and its points, boundaries, refinement and shrinking
(test_phases.py runs the phases against a stand-in for the lab; tests/lab/test_explore_lab.py
explores real runs)."""
from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import ValidationError

from faultlab.errors import ProfileError
from faultlab.explore.journal import Measured
from faultlab.explore.search import refinements, simpler
from faultlab.explore.space import (
    Boundaries,
    Boundary,
    Placement,
    Point,
    Space,
    Span,
    boundaries,
    count_points,
    grid,
    variants,
)
from faultlab.problems import Problems
from faultlab.profile import parse_profile

from .session import BASE, GEMINI, SESSION, timed


def space(**fields: Any) -> Space:
    return Space.model_validate({"faults": [{"fault": "drop", "connection": "first"}], **fields})


def test_a_span_steps_or_draws_from_the_seed() -> None:
    stepped = Span.model_validate({"from": "0s", "to": "1s", "step": "250ms"})
    assert stepped.values(random.Random(0)) == [0.0, 0.25, 0.5, 0.75, 1.0]
    drawn = Span.model_validate({"from": "0s", "to": "3s", "draw": 5})
    assert drawn.values(random.Random(7)) == drawn.values(random.Random(7))
    assert all(0 <= v <= 3 for v in drawn.values(random.Random(7)))
    for bad, why in (({"from": "2s", "to": "1s", "step": "1s"}, "after 'to'"),
                     ({"from": "0s", "to": "1s"}, "exactly one of"),
                     ({"from": "0s", "to": "1s", "step": "1s", "draw": 2}, "exactly one of"),
                     ({"from": "0s", "to": "100s", "step": "1ms"}, "at most 1000"),
                     ({"from": "0s", "to": "1s", "step": "1ms"}, "at most 1000")):  # 1001
        with pytest.raises(ValidationError, match=why):
            Span.model_validate(bad)
    most = Span.model_validate({"from": "0s", "to": "999ms", "step": "1ms"})
    assert len(most.values(random.Random(0))) == 1000


def test_fault_variants_take_each_value_of_a_one_of_field() -> None:
    problems = Problems("p.yaml", {})
    found = variants([{"fault": "close", "code": {"one_of": [1000, 1011]}},
                      {"fault": "drop", "direction": "both"}], problems)
    assert [v.do for v in found] == [{"fault": "close", "code": 1000},
                                     {"fault": "close", "code": 1011},
                                     {"fault": "drop", "direction": "both"}]
    assert not problems.items


def test_a_bad_fault_in_the_space_is_reported_at_its_line() -> None:
    text = BASE + "explore:\n  faults:\n    - {fault: drop, direction: sideways}\n    - {fault: nope}\n"
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, "p.yaml")
    lines = caught.value.problems
    assert any(line.startswith("p.yaml:13: explore.faults[0].direction") for line in lines), lines
    assert any(line.startswith("p.yaml:14: explore.faults[1].fault") for line in lines), lines



def test_boundaries_number_each_kind_and_keep_a_streams_ends() -> None:
    audio = [("client", "realtime_input.audio")] * 5
    session = timed([*SESSION[:3], *audio, *SESSION[3:]])
    every = boundaries(session, Boundaries.model_validate({"from": "either"}), GEMINI.kind_matches)
    kinds = [(b.sender, b.kind, b.nth) for b in every]
    # A stream of five chunks gives its first and its fifth.
    assert ("client", "realtime_input.audio", 1) in kinds
    assert ("client", "realtime_input.audio", 5) in kinds
    assert not any(k[1] == "realtime_input.audio" and k[2] in (2, 3, 4) for k in kinds)
    assert [b.index for b in every] == list(range(len(every)))
    server = boundaries(session, Boundaries(), GEMINI.kind_matches)
    assert [b.t for b in server] == [0.1, 0.8, 0.9, 1.1, 1.2]  # since the first message
    assert [(b.kind, b.nth) for b in server] == [
        ("setup_complete", 1), ("tool_call", 1), ("server_content.turn_complete", 1),
        ("server_content.model_turn", 1), ("server_content.turn_complete", 2)]
    # Kinds are matched as frame triggers match them (the profile's spelling).
    ends = boundaries(session, Boundaries.model_validate(
        {"kinds": ["serverContent.turnComplete"], "first": 1}), GEMINI.kind_matches)
    assert [(b.kind, b.nth) for b in ends] == [("server_content.turn_complete", 1)]
    assert ends[0].trigger() == {"frame": {"from": "server",
                                           "kind": "server_content.turn_complete"}}
    assert server[4].trigger()["frame"]["nth"] == 2


def test_the_grid_is_the_same_for_the_same_seed_and_says_its_size() -> None:
    found = [Boundary(i, "server", "tool_call", i + 1) for i in range(3)]
    one = space(after=["0s", "1s"], duration=["2s", "end"])
    points = grid(one, found, 1)
    assert len(points) == count_points(one, 3, 1) == 3 * 2 * 2
    assert {len(p.steps) for p in points} == {1}
    two = space(after={"from": "0s", "to": "2s", "draw": 3}, steps=[1, 2], draw=6, seed=4)
    drawn = grid(two, found, 1)
    assert [p.key for p in drawn] == [p.key for p in grid(two, found, 1)]
    assert sum(1 for p in drawn if len(p.steps) == 2) == 6
    assert [p.key for p in grid(two.model_copy(update={"seed": 5}), found, 1)] != [
        p.key for p in drawn]


def test_a_points_key_reads_back_and_names_it_the_same_everywhere() -> None:
    point = Point((Placement(2, 0.5, 1, None), Placement(3, 0.0, 0, 2.25)))
    assert point.key == "b2+0.5s/f1/end ; b3+0s/f0/2.25s"
    assert Point.parse(point.key) == point
    assert point.id == Point.parse(point.key).id and len(point.id) == 8
    with pytest.raises(ValueError, match="not a point's step"):
        Point.parse("b2+soon/f1/end")


def test_refinement_bisects_where_the_outcome_flips_down_to_its_step() -> None:
    def run(outcome: str) -> Measured:
        return Measured("k", "grid", 0, "PASS" if outcome == "pass" else "FAIL",
                        () if outcome == "pass" else ("truthful",))

    measured = {Point((Placement(1, 0.0, 0, None),)): run("fail"),
                Point((Placement(1, 1.0, 0, None),)): run("pass"),
                Point((Placement(1, 2.0, 0, None),)): run("pass"),
                Point((Placement(2, 0.0, 0, None),)): run("pass")}
    assert [p.key for p in refinements(measured, 0.1)] == ["b1+0.5s/f0/end"]
    # Close enough already: nothing more.
    assert refinements(measured, 1.0) == []
    # An error says nothing of the point: no flip against it.
    measured[Point((Placement(1, 1.0, 0, None),))] = Measured("k", "grid", 0, "ERROR")
    assert refinements(measured, 0.1) == []


def test_refinement_splits_a_gap_further_with_jobs_to_spare_on_bisection_s_points() -> None:
    """With jobs to spare, a flip's gap is split in 4, 8, ... at once: the points bisection would
    reach in later rounds, never finer than the step, the jobs shared among the gaps."""
    def run(outcome: str) -> Measured:
        return Measured("k", "grid", 0, "PASS" if outcome == "pass" else "FAIL",
                        () if outcome == "pass" else ("truthful",))

    def afters(points: list[Point]) -> list[float]:
        return sorted(p.steps[0].after for p in points)

    one_gap = {Point((Placement(1, 0.0, 0, None),)): run("fail"),
               Point((Placement(1, 1.0, 0, None),)): run("pass")}
    assert afters(refinements(one_gap, 0.25, jobs=1)) == [0.5]
    assert afters(refinements(one_gap, 0.25, jobs=3)) == [0.25, 0.5, 0.75]
    assert afters(refinements(one_gap, 0.25, jobs=16)) == [0.25, 0.5, 0.75]  # the step's limit
    # Sixteenths (62.5 ms parts, each point to the millisecond): 15 points, one round.
    sixteenths = afters(refinements(one_gap, 0.1, jobs=16))
    assert len(sixteenths) == 15 and all(abs(a - i / 16) <= 0.001
                                         for i, a in enumerate(sixteenths, 1))
    two_gaps = {**one_gap, Point((Placement(2, 0.0, 0, None),)): run("pass"),
                Point((Placement(2, 1.0, 0, None),)): run("fail")}
    assert len(refinements(two_gaps, 0.1, jobs=6)) == 2 * 3  # 3 jobs each: quarters


def test_simpler_schedules_are_one_move_away_and_simplest_first() -> None:
    point = Point((Placement(2, 1.0, 1, None), Placement(3, 0.5, 0, 4.0)))
    moments = [0.0, 0.5, 1.0, 1.5, 2.0]
    found = simpler(point, [1.0, 4.0, None], moments, 0.1)
    assert all(c.simplicity(moments) < point.simplicity(moments) for c in found)
    assert found[0].steps == (Placement(2, 1.0, 1, None),) or len(found[0].steps) == 1
    keys = {c.key for c in found}
    assert "b2+1s/f0/end ; b3+0.5s/f0/4s" in keys  # a simpler fault
    assert "b2+1s/f1/1s ; b3+0.5s/f0/4s" in keys  # a shorter duration
    assert "b0+1s/f1/end ; b3+0.5s/f0/4s" in keys  # an earlier trigger
    assert "b2+0s/f1/end ; b3+0.5s/f0/4s" in keys  # no delay
    assert "b1+0s/f1/end ; b3+0.5s/f0/4s" in keys  # an earlier message, no delay


def test_the_earliest_trigger_is_the_earliest_moment_in_the_session() -> None:
    # 2 s after the first message comes after the second message itself (at 0.9 s).
    moments = [0.0, 0.9]
    late = Point((Placement(0, 2.0, 0, None),))
    early = Point((Placement(1, 0.0, 0, None),))
    assert early.simplicity(moments) < late.simplicity(moments)
    assert [c.key for c in simpler(late, [None], moments, 0.1)][:1] == ["b0+0s/f0/end"]


def test_a_point_is_a_profile_that_validates() -> None:
    found = boundaries(timed(SESSION), Boundaries(), GEMINI.kind_matches)
    faults = variants([{"fault": "drop", "connection": "first"}], Problems("p", {}))
    base = {"name": "booking", **{k: v for k, v in parse_yaml(BASE).items() if k != "name"}}
    from faultlab.explore import schedule

    point = Point((Placement(1, 0.5, 0, 3.0),))
    text = schedule.profile_text(base, "booking-x", schedule.steps_of(point, found, faults),
                                 ["found by explore"])
    assert text.startswith("# found by explore\n")
    profile = parse_profile(text, "x.yaml")
    assert [(s.id, s.fault) for s in profile.timeline] == [("x1", "drop"), ("x1-end", "restore")]
    assert profile.timeline[0].when.frame is not None
    assert profile.timeline[0].when.frame.kind == "tool_call"
    assert profile.timeline[0].after == 0.5 and profile.timeline[1].after == 3.0


def parse_yaml(text: str) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def test_the_block_s_budget_holds_unless_the_command_line_gives_one() -> None:
    """`runs` and `time` in the explore block are the budget; `--runs` and `--time` override."""
    import time

    from faultlab.commands.explore import _budget

    block = space(runs=5, time="10m")
    before = time.monotonic()
    from_block, given = _budget((None, None), block), _budget((3, 60.0), block)
    after = time.monotonic()
    assert from_block.runs == 5 and from_block.deadline is not None
    assert before + 600 <= from_block.deadline <= after + 600
    assert given.runs == 3 and given.deadline is not None
    assert before + 60 <= given.deadline <= after + 60
    assert _budget((None, None), space()).runs is None
    assert _budget((None, None), space()).deadline is None
