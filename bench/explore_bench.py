"""`faultlab explore`'s throughput: points per minute on this machine, beside the same points run
one by one with `faultlab run`.

The exploration is profiles/explore/booking-naive.yaml's booking conversation on a small space
(the first connection dropped 0, 1 and 2 s after the server's tool call and turn ends), grid only
(`--shard 1/1`: no refinement, no shrinking), with `--jobs`; then every profile the exploration
ran (its unhurt run and each point, from its points/ folder) is run again, one `faultlab run`
after another. Both sides run the same profiles, so points per minute compare the way they are
run; the verdicts are compared too (a point near a window's edge may flip, so a difference is
reported, not failed). Needs root for the labs.

    python bench/explore_bench.py [--jobs N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import table
from table import Measure, Row, versus

from faultlab.report.record import RunRecord, find_records

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "profiles" / "explore" / "booking-naive.yaml"
SPACE = ("{at: {from: server, kinds: [toolCall, serverContent.turnComplete]}, "
         "after: [0s, 1s, 2s], refine: 0s}")
GOAL = 3.0


def _faultlab(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "faultlab", *argv], cwd=ROOT,
                          capture_output=True, text=True, check=False)


def collect(jobs: str = "auto") -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="faultlab-explore-bench-") as scratch:
        folder = Path(scratch) / "exploration"
        started = time.monotonic()
        done = _faultlab("explore", "-q", "--jobs", jobs, "--shard", "1/1", "--space", SPACE,
                         "--out", str(folder), str(PROFILE))
        explore_s = time.monotonic() - started
        journal = [json.loads(line) for line in (folder / "journal.jsonl").read_text()
                   .splitlines()[1:]] if (folder / "journal.jsonl").exists() else []
        if done.returncode not in (0, 1) or not journal:
            print(done.stdout, done.stderr)
            raise RuntimeError(f"faultlab explore exited {done.returncode}")
        profiles = sorted((folder / "points").glob("*.yaml"))
        seq_dir = Path(scratch) / "one-by-one"
        started = time.monotonic()
        for profile in profiles:
            _faultlab("run", "-q", "--jobs", "1", "--runs-dir", str(seq_dir), str(profile))
        seq_s = time.monotonic() - started
        records = [RunRecord.load(p) for p in find_records([seq_dir])]
    runs = len(journal)
    explored = {Path(r["run"]["run_dir"]).name.split("-", 2)[2].split(".")[0]:
                r["run"]["verdict"] for r in journal}
    again = {Path(r.run_dir).name.split("-", 2)[2]: r.verdict for r in records}
    differ = sorted(k for k in explored if again.get(k) != explored[k])
    per_min, seq_per_min = runs / explore_s * 60, len(records) / seq_s * 60
    print(f"{'explore, --jobs ' + jobs:<44} {explore_s:>10.1f} s   {runs} runs, "
          f"{per_min:.1f} points/min")
    print(f"{'the same profiles, one faultlab run each':<44} {seq_s:>10.1f} s   "
          f"{len(records)} runs, {seq_per_min:.1f} points/min")
    print(f"{'verdicts that differ':<44} {len(differ):>10}   {', '.join(differ)}")
    return [versus(
        f"explore points per minute (--jobs {jobs})", Measure(per_min, "points/min"),
        "one `faultlab run` a point", Measure(seq_per_min, "points/min"), "higher",
        at_least=GOAL, also=len(records) == runs,
        goal="every point rerun",
        note=f"explore: {PROFILE.relative_to(ROOT)} on the space {SPACE}, grid only "
             f"(--shard 1/1), {runs} runs (the unhurt run and {runs - 1} points) in "
             f"{explore_s:.0f} s; the same {len(records)} profiles one `faultlab run` after "
             f"another in {seq_s:.0f} s; verdicts differing: {len(differ)}")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="auto", help="runs at once for the exploration")
    table.add_json_option(parser)
    args = parser.parse_args()
    started, clock, m = datetime.now(), time.monotonic(), table.machine()
    rows = collect(args.jobs)
    table.finish(rows, args.json, m, started, time.monotonic() - clock)
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
