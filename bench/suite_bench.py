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


def run_suite(profiles: str, jobs: str, runs_dir: Path) -> tuple[float, int, int, int]:
    """Wall seconds, exit code, runs passed and runs in all."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "faultlab", "run", "-q", "--jobs", jobs,
                           "--runs-dir", str(runs_dir), profiles], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    found = re.search(r"# faultlab suite: (\d+) of (\d+) runs passed", done.stdout)
    passed, total = (int(found.group(1)), int(found.group(2))) if found else (0, 0)
    return wall, done.returncode, passed, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="auto", help="runs at once for the parallel suite")
    parser.add_argument("--profiles", default="profiles/field/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="faultlab-suite-bench-") as scratch:
        seq = run_suite(args.profiles, "1", Path(scratch) / "sequential")
        par = run_suite(args.profiles, args.jobs, Path(scratch) / "parallel")
    for label, (wall, code, passed, total) in (("sequential", seq), (f"--jobs {args.jobs}", par)):
        print(f"{'field suite, ' + label:<44} {wall:>10.1f} s        {passed}/{total} PASS, "
              f"exit {code}")
    ratio = seq[0] / par[0]
    ok = ratio >= 2.5 and par[1] == 0 and par[2] == par[3] > 0
    print(f"{'field suite speed-up with --jobs':<44} {ratio:>10.2f} x        goal >= 2.5  "
          f"{'ok' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
