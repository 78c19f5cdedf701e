"""`faultlab explore`'s throughput: points per minute on this machine, beside the same exploration
by a baseline commit's code (issue #36: at least twice today's, the same verdicts), and beside the
same points run one by one with `faultlab run`.

The exploration is faultlab/profiles/explore/booking-naive.yaml's booking conversation on a
small space (the first connection dropped 0, 1 and 2 s after the server's tool call and turn
ends), grid only (`--shard 1/1`: no refinement, no shrinking), seed 0, with `--jobs`. The
baseline (`BASELINE`, or `--baseline REV`; bench/baseline.py) runs the same command from a
temporary worktree of its own; its points' verdicts must be this code's. Then every profile
this code's exploration ran (its unhurt run and each point, from its points/ folder) is run
again, one `faultlab run` after another. Both compare points per minute the way each runs
them; a point whose verdict differs is named (one near a window's edge may flip). Needs root for
the labs.

    python bench/explore_bench.py [--jobs N] [--baseline REV] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import table
from baseline import BASELINE, ROOT, checkout, describe, unavailable
from table import Measure, Row, skipped, versus

from faultlab.report.record import RunRecord, find_records

PROFILE = Path("faultlab/profiles/explore/booking-naive.yaml")  # in each side's checkout
SPACE = ("{at: {from: server, kinds: [toolCall, serverContent.turnComplete]}, "
         "after: [0s, 1s, 2s], refine: 0s}")
GOAL = 3.0  # against one `faultlab run` a point
BASELINE_GOAL = 2.0  # against the baseline's exploration


def _faultlab(code: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`faultlab ARGV` by the code of the checkout `code`."""
    return subprocess.run([sys.executable, "-m", "faultlab", *argv], cwd=code,
                          env={**os.environ, "PYTHONPATH": str(code)},
                          capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class Explored:
    """One exploration: how long it took, and each run's verdict by its point's name."""

    folder: Path
    seconds: float
    verdicts: dict[str, str]

    @property
    def per_min(self) -> float:
        return len(self.verdicts) / self.seconds * 60


def explore(code: Path, jobs: str, folder: Path) -> Explored:
    started = time.monotonic()
    done = _faultlab(code, "explore", "-q", "--jobs", jobs, "--shard", "1/1", "--seed", "0",
                     "--space", SPACE, "--out", str(folder), str(PROFILE))
    seconds = time.monotonic() - started
    journal = [json.loads(line) for line in (folder / "journal.jsonl").read_text()
               .splitlines()[1:]] if (folder / "journal.jsonl").exists() else []
    if done.returncode not in (0, 1) or not journal:
        print(done.stdout, done.stderr)
        raise RuntimeError(f"faultlab explore ({code}) exited {done.returncode}")
    return Explored(folder, seconds, {_point(r["run"]["run_dir"]): r["run"]["verdict"]
                                      for r in journal})


def _point(run_dir: str) -> str:
    """A run folder's point name (`20261205-120914-<point>`)."""
    return Path(run_dir).name.split("-", 2)[2].split(".")[0]


def collect(jobs: str = "auto", baseline: str = BASELINE) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="faultlab-explore-bench-") as scratch:
        here = explore(ROOT, jobs, Path(scratch) / "exploration")
        print(f"{'explore, --jobs ' + jobs:<44} {here.seconds:>10.1f} s   "
              f"{len(here.verdicts)} runs, {here.per_min:.1f} points/min", flush=True)
        rows = [_versus_baseline(here, jobs, baseline, Path(scratch))]
        profiles = sorted((here.folder / "points").glob("*.yaml"))
        seq_dir = Path(scratch) / "one-by-one"
        started = time.monotonic()
        for profile in profiles:
            _faultlab(ROOT, "run", "-q", "--jobs", "1", "--runs-dir", str(seq_dir), str(profile))
        seq_s = time.monotonic() - started
        again = {_point(r.run_dir): r.verdict
                 for r in (RunRecord.load(p) for p in find_records([seq_dir]))}
    runs = len(here.verdicts)
    differ = _differ(here.verdicts, again)
    seq_per_min = len(again) / seq_s * 60
    print(f"{'the same profiles, one faultlab run each':<44} {seq_s:>10.1f} s   "
          f"{len(again)} runs, {seq_per_min:.1f} points/min")
    print(f"{'verdicts that differ':<44} {len(differ):>10}   {', '.join(differ)}")
    return [*rows, versus(
        f"explore points per minute (--jobs {jobs})", Measure(here.per_min, "points/min"),
        "one `faultlab run` a point", Measure(seq_per_min, "points/min"), "higher",
        at_least=GOAL, also=len(again) == runs,
        goal="every point rerun",
        note=f"explore: {PROFILE} on the space {SPACE}, grid only "
             f"(--shard 1/1), {runs} runs (the unhurt run and {runs - 1} points) in "
             f"{here.seconds:.0f} s; the same {len(again)} profiles one `faultlab run` after "
             f"another in {seq_s:.0f} s; verdicts differing: {len(differ)}")]


def _versus_baseline(here: Explored, jobs: str, baseline: str, scratch: Path) -> Row:
    figure = f"explore points per minute (--jobs {jobs}), beside the baseline's"
    why = unavailable(baseline)
    if why is not None:
        return skipped(figure, f"baseline {baseline[:7]}", why, goal=f">= {BASELINE_GOAL:g}x")
    peer, what = describe(baseline)
    with checkout(baseline) as old:
        there = explore(old, jobs, scratch / "baseline-exploration")
    print(f"{'explore, --jobs ' + jobs + ', ' + peer:<44} {there.seconds:>10.1f} s   "
          f"{len(there.verdicts)} runs, {there.per_min:.1f} points/min", flush=True)
    differ = _differ(here.verdicts, there.verdicts)
    print(f"{'verdicts that differ from the baseline':<44} {len(differ):>10}   "
          f"{', '.join(differ)}")
    return versus(
        figure, Measure(here.per_min, "points/min"), peer,
        Measure(there.per_min, "points/min"), "higher", at_least=BASELINE_GOAL,
        also=not differ, goal="the same verdicts",
        note=f"the same exploration (seed 0) by {peer}{what}, from a temporary worktree: "
             f"{len(there.verdicts)} runs in {there.seconds:.0f} s, against {len(here.verdicts)} "
             f"in {here.seconds:.0f} s here; verdicts differing: "
             f"{', '.join(differ) if differ else 'none'}")


def _differ(ours: dict[str, str], theirs: dict[str, str]) -> list[str]:
    return sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="auto", help="runs at once for the exploration")
    parser.add_argument("--baseline", default=BASELINE, metavar="REV",
                        help="the commit to compare with (default: the code before issue #36's "
                             "cuts)")
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock, m = datetime.now(), time.monotonic(), table.machine()
    rows = collect(args.jobs, args.baseline)
    table.finish(rows, args.json, m, started, time.monotonic() - clock)
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
