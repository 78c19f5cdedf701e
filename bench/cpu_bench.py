"""CPU seconds per run, by process: `faultlab run` of a plain lab and of a proxied field run,
beside the same runs of a fixed baseline commit, measured in the same bench run.

The profiles are faultlab/profiles/silent-loss.yaml (a plain lab: the Python WebSocket peers) and
faultlab/profiles/field/P1.yaml (a proxied field run: the mitmproxy proxy, the emulator and the
booking client), each run as users run it (`faultlab run -q`, its timeline drawn): alone, and
four at a time as a suite with `--jobs 2` (as CI and `faultlab explore` run them: each a job,
forked warm), whose figures are the whole's over its four runs. The baseline
(`BASELINE`, or `--baseline REV`) is checked out into a temporary git worktree, removed after,
and run from there by the same interpreter with its checkout on PYTHONPATH; each side runs its
own copy of the profile. The sides alternate, `--runs` times each. Each run's process tree is
sampled from /proc every 20 ms (process_tree.py) and its CPU split by role: faultlab (the run and
its helpers), proxy, emulator, client, server peer, capture, other. The table has each profile's
median total against the baseline's (goal, issue #36: at most half of it) and each role's median
beside the baseline's, to show where the CPU goes. Needs root for the labs.

    python bench/cpu_bench.py [--runs 3] [--baseline REV] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import table
from baseline import BASELINE, ROOT, checkout, compile_modules, describe, unavailable
from process_tree import ROLES, Tree, read_cmdline, read_stats, recorded_argv
from table import Measure, Row, skipped, versus

from faultlab.jobs import STOP_GRACE_S

SILENT_LOSS, P1 = "faultlab/profiles/silent-loss.yaml", "faultlab/profiles/field/P1.yaml"


@dataclass(frozen=True)
class Case:
    """What one sampled `faultlab run -q` runs (paths inside a checkout: each side runs its own
    copy), and how many runs that is: a figure is per run."""

    name: str
    args: tuple[str, ...]
    runs: int = 1


CASES = (Case("silent-loss", (SILENT_LOSS,)), Case("field/P1", (P1,)),
         # As a suite, explore and CI run them: each run a job of its own (faultlab.warm).
         Case("silent-loss x4 --jobs 2", ("--jobs", "2", *[SILENT_LOSS] * 4), runs=4),
         Case("field/P1 x4 --jobs 2", ("--jobs", "2", *[P1] * 4), runs=4))
GOAL = 2.0
INTERVAL_S = 0.02
# `faultlab run -q`'s line for a run: "== field-P1: PASS in 3.51s; report: ...".
VERDICT_LINE = re.compile(r"^== .+?: (\w+) in [\d.]+s", re.MULTILINE)


@dataclass
class Sampled:
    """One run: its exit code, its verdict as printed, its process tree's CPU as sampled, and
    the kernel's count of the CPU of the run and of its descendants it reaped."""

    code: int
    verdict: str
    tree: Tree
    reaped_s: float
    runs: int

    @property
    def total_s(self) -> float:
        """Per run."""
        return sum(self.tree.cpu_s.values()) / self.runs

    def role_s(self, role: str) -> float:
        """Per run."""
        return self.tree.by_role().get(role, 0.0) / self.runs

    @property
    def outcome(self) -> str:
        return f"{self.verdict} (exit {self.code})"


def _reaped_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _stop(proc: subprocess.Popen[str]) -> None:
    """As faultlab's jobs stop theirs: SIGTERM, so that the run tears its lab down, then kill."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_sampled(checkout: Path, case: Case, runs_dir: Path) -> Sampled:
    """One `faultlab run -q` of `case` by the code of `checkout`, its process tree sampled."""
    argv = [sys.executable, "-m", "faultlab", "run", "-q", "--runs-dir", str(runs_dir),
            *case.args]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    earlier = set(runs_dir.glob("*/events.jsonl"))
    before = _reaped_cpu_s()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        tree = Tree(proc.pid)
        try:
            while proc.poll() is None:
                tree.update(read_stats(), read_cmdline)
                time.sleep(INTERVAL_S)
        finally:
            _stop(proc)
        out.seek(0)
        printed = out.read()
    for events in set(runs_dir.glob("*/events.jsonl")) - earlier:
        tree.recorded.update(recorded_argv(events))
    verdicts = VERDICT_LINE.findall(printed)
    return Sampled(proc.returncode, ",".join(sorted(verdicts)) or "no verdict", tree,
                   (_reaped_cpu_s() - before) / case.runs, case.runs)


def _figure(case: Case, part: str) -> str:
    return f"CPU per run: {case.name} ({part})"


def _median(runs: list[Sampled], role: str | None = None) -> float:
    return statistics.median(r.total_s if role is None else r.role_s(role) for r in runs)


def _span(runs: list[Sampled]) -> str:
    totals = [r.total_s for r in runs]
    return f"{min(totals):.2f}-{max(totals):.2f} s"


def _outcomes(runs: list[Sampled]) -> str:
    seen = [r.outcome for r in runs]
    return ", ".join(f"{o} x{seen.count(o)}" for o in dict.fromkeys(seen))


def case_rows(case: Case, now: list[Sampled], then: list[Sampled], peer: str,
              what: str) -> list[Row]:
    """The total's row against the goal, then one row per role that spent CPU on either side."""
    same = sorted(r.outcome for r in now) == sorted(r.outcome for r in then)
    verdicts = (f"verdicts the same ({_outcomes(now)})" if same else
                f"verdicts DIFFER: {_outcomes(now)} here, {_outcomes(then)} at the baseline")
    # The kernel counts what the run reaped: not a suite's warm jobs, the warm server's children.
    reaped = ("" if case.runs > 1 else
              f"; the kernel's count of the reaped tree "
              f"{statistics.median(r.reaped_s for r in now):.2f} s and "
              f"{statistics.median(r.reaped_s for r in then):.2f} s")
    out = [versus(
        _figure(case, "total"), Measure(_median(now), "s"), peer, Measure(_median(then), "s"),
        "lower", at_least=GOAL,
        note=f"cpu: `faultlab run -q {' '.join(dict.fromkeys(case.args))}` (timeline drawn"
             f"{f'; CPU per run: the whole over {case.runs}' if case.runs > 1 else ''}), "
             f"{len(now)} times "
             f"alternating with the same of {peer}{what} from a temporary worktree; the CPU of "
             f"each run's process tree, sampled from /proc every {INTERVAL_S * 1000:.0f} ms, "
             f"median of the totals ({_span(now)}; baseline "
             f"{_span(then)}{reaped}); {verdicts}")]
    for role in ROLES:
        if not any(r.role_s(role) > 0 for r in [*now, *then]):
            continue
        others = sorted({c for r in [*now, *then] for c in r.tree.commands(role)})
        out.append(versus(_figure(case, role), Measure(_median(now, role), "s"), peer,
                          Measure(_median(then, role), "s"), "lower",
                          note=f"cpu: {role}: {'; '.join(others)}" if role == "other" else ""))
    return out


def collect(runs: int = 3, baseline: str = BASELINE) -> list[Row]:
    why = unavailable(baseline)
    if why is not None:
        return [skipped(_figure(c, "total"), f"baseline {baseline[:7]}", why,
                        goal=f">= {GOAL:g}x") for c in CASES]
    peer, what = describe(baseline)
    here: dict[Case, list[Sampled]] = {c: [] for c in CASES}
    there: dict[Case, list[Sampled]] = {c: [] for c in CASES}
    with (checkout(baseline) as old,
          tempfile.TemporaryDirectory(prefix="faultlab-cpu-bench-") as scratch):
        compile_modules(ROOT)
        for i in range(runs):
            for case in CASES:
                for label, code, side in (("here", ROOT, here), (peer, old, there)):
                    run = run_sampled(code, case, Path(scratch) / label)
                    side[case].append(run)
                    roles = ", ".join(f"{k} {v / case.runs:.2f}" for k, v in sorted(
                        run.tree.by_role().items(), key=lambda kv: -kv[1]))
                    print(f"{f'{case.name} {i + 1}/{runs}, {label}':<44} "
                          f"{run.total_s:>10.2f} s   {run.outcome}; {roles}", flush=True)
    return [row for c in CASES for row in case_rows(c, here[c], there[c], peer, what)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each profile on each side")
    parser.add_argument("--baseline", default=BASELINE, metavar="REV",
                        help="the commit to compare with (default: the code before issue #36's "
                             "CPU cuts)")
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock, machine = datetime.now(), time.monotonic(), table.machine()
    rows = collect(args.runs, args.baseline)
    table.finish(rows, args.json, machine, started, time.monotonic() - clock)


if __name__ == "__main__":
    main()
