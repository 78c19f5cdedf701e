"""The field suite one run after another vs `--jobs`, side by side in one go, and the suite
against the field study it replays.

- a subset of the field profiles (by default eight of similar length from the families R, P,
  N, B, BR and A), sequential (`--jobs 1`) and with `--jobs`: the wall time of each, the speed-up
  (goal: >= 2.5x on 2 cores), whether every run PASSes, and whether each scenario's outcome
  (verdict, bookings, what the user was told) is the same both ways;
- the whole field suite with `--jobs`: its wall time against the field study's two days (its
  compression factor), and every run PASSing;
- one B run (B1) against the field's 15 minutes for it.

What each run produced is read from its result.json (`faultlab.report.record`), not from the
printed table.

    python bench/suite_bench.py [--jobs N] [--subset R0 R1 ...] [--no-full] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import table
from table import NEEDS_ROOT, Measure, Row, skipped, versus

from faultlab.report.record import RecordError, RunRecord, find_records

ROOT = Path(__file__).resolve().parents[1]
FIELD = ROOT / "profiles" / "field"
# Eight profiles of the families R, P, N, B, BR and A, of similar length (12-17 s here): enough
# runs that --jobs is measured by its throughput, not by the longest run.
SUBSET = ("R0", "R1", "P3", "N3", "B1", "BR1", "A1", "A3")
FIELD_STUDY_S = 2 * 24 * 3600  # the field study took two days
B_RUN_S = 15 * 60  # each of its B runs took 15 minutes
# The columns a parallel run must not change (the rest are measured times).
OUTCOME_CELLS = ("bookings", "user told")


@dataclass
class Suite:
    """A suite's wall time, exit code and runs (from their result.json files)."""

    wall_s: float
    code: int
    records: list[RunRecord]

    @property
    def passed(self) -> int:
        return sum(1 for r in self.records if r.verdict == "PASS")

    def outcomes(self) -> list[tuple[str, ...]]:
        """Each run's outcome without its measured times, in profile order."""
        return sorted((r.profile, r.verdict, *(str(r.cells.get(c)) for c in OUTCOME_CELLS))
                      for r in self.records)

    def duration(self, profile: str) -> float | None:
        return next((r.duration_s for r in self.records if r.profile == profile), None)


def run_suite(profiles: list[Path], jobs: str, runs_dir: Path) -> Suite:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "faultlab", "run", "-q", "--jobs", jobs,
                           "--runs-dir", str(runs_dir), *map(str, profiles)], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    records = []
    for path in find_records([runs_dir]) if runs_dir.exists() else []:
        try:
            records.append(RunRecord.load(path))
        except RecordError as exc:
            print(f"  {exc}")
    return Suite(wall, done.returncode, records)


def speedup_rows(names: list[str], jobs: str, scratch: Path) -> list[Row]:
    profiles = [FIELD / f"{name}.yaml" for name in names]
    seq = run_suite(profiles, "1", scratch / "sequential")
    par = run_suite(profiles, jobs, scratch / "parallel")
    for label, suite in (("sequential", seq), (f"--jobs {jobs}", par)):
        print(f"{'field subset, ' + label:<44} {suite.wall_s:>10.1f} s        "
              f"{suite.passed}/{len(suite.records)} PASS, exit {suite.code}")
    same = seq.outcomes() == par.outcomes() and bool(seq.records)
    print(f"{'outcomes (verdict, bookings, user told) same':<44} {'yes' if same else 'NO':>10}")
    ratio = seq.wall_s / par.wall_s
    all_pass = all(s.code == 0 and s.passed == len(s.records) == len(names) for s in (seq, par))
    ok = ratio >= 2.5 and all_pass and same
    print(f"{'field subset speed-up with --jobs':<44} {ratio:>10.2f} x        goal >= 2.5  "
          f"{'ok' if ok else 'MISSED'}")
    rows = [versus(
        f"field suite subset ({len(names)} profiles), --jobs {jobs}", Measure(par.wall_s, "s"),
        "sequential", Measure(seq.wall_s, "s"), "lower", at_least=2.5, also=all_pass and same,
        goal="all PASS, same outcomes",
        note=f"suite: `faultlab run -q` of profiles/field/{{{','.join(names)}}} (a subset, so that "
             f"make bench stays under 10 minutes) with --jobs 1 and --jobs {jobs}; "
             f"{seq.passed}/{len(seq.records)} and {par.passed}/{len(par.records)} PASS, outcomes "
             f"{'the same' if same else 'DIFFERENT'} (from result.json)")]
    b1 = seq.duration("field-B1")
    if b1 is not None:
        rows.append(versus(
            "field B1 run, time-compressed", Measure(b1, "s"), "the field's 15-minute run",
            Measure(B_RUN_S, "s"), "lower",
            note="B run: field scenario B1's run in the sequential subset (its result.json "
                 "duration) against the 15 minutes the field study ran it"))
    return rows


def full_rows(jobs: str, scratch: Path) -> list[Row]:
    profiles = sorted(FIELD.glob("*.yaml"))
    suite = run_suite(profiles, jobs, scratch / "full")
    ok = suite.code == 0 and suite.passed == len(suite.records) == len(profiles)
    print(f"{'field suite, --jobs ' + jobs:<44} {suite.wall_s:>10.1f} s        "
          f"{suite.passed}/{len(suite.records)} PASS, exit {suite.code}")
    print(f"{'compression against the two-day field study':<44} "
          f"{FIELD_STUDY_S / suite.wall_s:>10.0f} x")
    return [versus(
        f"field suite ({len(profiles)} profiles), --jobs {jobs}", Measure(suite.wall_s, "s"),
        "the field study (2 days)", Measure(FIELD_STUDY_S, "s"), "lower", also=ok,
        goal="all PASS",
        note=f"compression: the whole field suite (profiles/field/, the field study's scenarios "
             f"and 3 variants of them) with --jobs {jobs}, {suite.passed}/{len(suite.records)} "
             f"PASS, against the two days the field study took (its B runs 15 minutes each)")]


def collect(jobs: str = "auto", subset: tuple[str, ...] = SUBSET, full: bool = True) -> list[Row]:
    if os.geteuid() != 0:
        return [skipped("field suite subset, --jobs", "sequential",
                        NEEDS_ROOT)]
    with tempfile.TemporaryDirectory(prefix="faultlab-suite-bench-") as scratch:
        rows = speedup_rows(list(subset), jobs, Path(scratch))
        if full:
            rows += full_rows(jobs, Path(scratch))
        else:
            rows.append(skipped("field suite, --jobs", "the field study (2 days)",
                                "not asked (--no-full)"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="auto", help="runs at once for the parallel suite")
    parser.add_argument("--subset", nargs="+", default=list(SUBSET), metavar="NAME",
                        help="field profiles (profiles/field/NAME.yaml) for the speed-up")
    parser.add_argument("--no-full", dest="full", action="store_false",
                        help="skip the whole suite against the field study")
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock, machine = datetime.now(), time.monotonic(), table.machine()
    rows = collect(args.jobs, tuple(args.subset), args.full)
    table.finish(rows, args.json, machine, started, time.monotonic() - clock)


if __name__ == "__main__":
    main()
