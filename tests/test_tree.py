"""What the repository holds: modules a reader can take in at once (Python and JavaScript, the
tests and bench/ included), none over 450 lines."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 450
SOURCES = ("*.py", "*.mjs", "*.js")


def tracked_sources() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "--", *SOURCES], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    return [REPO / name for name in listed.split("\0") if name]


def test_no_module_is_over_450_lines() -> None:
    sources = tracked_sources()
    assert any(path.name == "cli.py" for path in sources)  # the listing sees the tree at all
    long = {str(path.relative_to(REPO)): n for path in sources
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these (lines): {long}"
