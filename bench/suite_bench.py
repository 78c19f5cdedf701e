"""The field suite one run after another vs `--jobs`, side by side in one go: wall time of each,
the speed-up (goal: >= 2.5x on 2 cores), and whether every profile still PASSes.

    python bench/suite_bench.py [--jobs N] [--profiles PATH]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_suite(profiles: str, jobs: str, runs_dir: Path) -> tuple[float, int, int, int, list[str]]:
    """Wall seconds, exit code, runs passed, runs in all, and the table's outcome columns."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "faultlab", "run", "-q", "--jobs", jobs,
                           "--runs-dir", str(runs_dir), profiles], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    found = re.search(r"# faultlab suite: (\d+) of (\d+) runs passed", done.stdout)
    passed, total = (int(found.group(1)), int(found.group(2))) if found else (0, 0)
    return wall, done.returncode, passed, total, outcomes(done.stdout)


def outcomes(table: str) -> list[str]:
    """Each scenario's row without the measured times: scenario, runs, verdicts, bookings, and
    what the user was told (what parallel runs must not change)."""
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in table.splitlines()
            if line.startswith("| ")]
    if not rows:
        return []
    keep = [i for i, h in enumerate(rows[0]) if h in ("scenario", "runs", "verdicts", "bookings",
                                                      "user told")]
    return [" | ".join(row[i] for i in keep) for row in rows[2:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="auto", help="runs at once for the parallel suite")
    parser.add_argument("--profiles", default="profiles/field/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="faultlab-suite-bench-") as scratch:
        seq = run_suite(args.profiles, "1", Path(scratch) / "sequential")
        par = run_suite(args.profiles, args.jobs, Path(scratch) / "parallel")
    for label, (wall, code, passed, total, _) in (("sequential", seq),
                                                   (f"--jobs {args.jobs}", par)):
        print(f"{'field suite, ' + label:<44} {wall:>10.1f} s        {passed}/{total} PASS, "
              f"exit {code}")
    same = seq[4] == par[4] and bool(seq[4])
    print(f"{'suite table (outcome columns) the same':<44} {'yes' if same else 'NO':>10}")
    ratio = seq[0] / par[0]
    ok = ratio >= 2.5 and par[1] == 0 and par[2] == par[3] > 0 and same
    print(f"{'field suite speed-up with --jobs':<44} {ratio:>10.2f} x        goal >= 2.5  "
          f"{'ok' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
