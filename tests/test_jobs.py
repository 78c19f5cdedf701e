"""Planning a suite: shards that are stable and together whole, and the progress line."""

from __future__ import annotations

import pytest

from faultlab.jobs import PlannedRun, Progress, parse_shard, plan, shard
from faultlab.profile import Profile, parse_profile
from faultlab.report.record import RunRecord


def profiles(*names: str) -> list[Profile]:
    return [parse_profile(f"name: {n}\nclient: {{command: [x]}}\n") for n in names]


def test_shards_are_disjoint_whole_even_and_order_free() -> None:
    runs = plan(profiles("b", "a", "d", "c", "e"), repeat=2)
    for n in (1, 2, 3, 4, 10):
        parts = [shard(runs, k, n) for k in range(1, n + 1)]
        keys = [r.key for part in parts for r in part]
        assert sorted(keys) == sorted(r.key for r in runs) and len(set(keys)) == len(keys)
        sizes = [len(p) for p in parts]
        assert max(sizes) - min(sizes) <= 1
        # The same split whatever order the command line gave.
        again = [shard(list(reversed(runs)), k, n) for k in range(1, n + 1)]
        assert [sorted(r.key for r in p) for p in again] == [sorted(r.key for r in p)
                                                             for p in parts]


def test_a_shard_keeps_the_planned_order() -> None:
    runs = plan(profiles("z", "a", "m"), repeat=1)
    assert [r.profile.name for r in shard(runs, 1, 1)] == ["z", "a", "m"]


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0", "-1/2", "1/2/3"])
def test_bad_shards_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a shard"):
        parse_shard(text)


def test_progress_counts_and_estimates() -> None:
    progress = Progress(total=4, jobs=2, live=False)
    progress.started_one()
    progress.started_one()
    assert progress.line().startswith("[0/4 done, 2 running, 0 failed, 0:00 elapsed")
    record = RunRecord(profile="p", verdict="FAIL", exit_code=1, run_dir="", started="",
                       duration_s=60.0)
    progress.finished_one(record)
    line = progress.line()
    assert "[1/4 done, 1 running, 1 failed" in line and "~1:30 left" in line


def test_planned_runs_repeat_each_profile_in_turn() -> None:
    runs = plan(profiles("a", "b"), repeat=2)
    assert [(r.profile.name, r.repeat) for r in runs] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert isinstance(runs[0], PlannedRun)


def test_shards_key_on_the_file_name_and_share_out_a_profile_given_twice() -> None:
    """However the path was written (`profiles/x.yaml`, `./profiles/x.yaml`, absolute), a run
    lands in the same shard; a profile given twice is two runs in the shards."""
    from pathlib import Path

    def at(folder: str) -> list[PlannedRun]:
        return plan([parse_profile(f"name: {n}\nclient: {{command: [x]}}\n",
                                   path=Path(folder) / f"{n}.yaml") for n in "dbca"], 1)

    for k in (1, 2, 3):
        names = [[r.profile.name for r in shard(at(f), k, 3)]
                 for f in ("profiles", "./profiles", "/ci/checkout/profiles")]
        assert names[0] == names[1] == names[2]
    twice = plan(profiles("a", "a", "b"), repeat=1)
    assert sorted(len(shard(twice, k, 3)) for k in (1, 2, 3)) == [1, 1, 1]
