"""The code a bench part compares itself with: a baseline commit checked out into a temporary
git worktree (removed after), run by the same interpreter with its checkout on PYTHONPATH."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The code before issue #36's CPU cuts: the "today's" figures that the issue asks to halve
# (CPU per run) and to double (explore's points per minute).
BASELINE = "05333b96c918ae5931c548ef8c612a6eb3522d5a"


def git(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)


def unavailable(rev: str) -> str | None:
    """Why `rev` cannot be checked out here, or None."""
    if shutil.which("git") is None:
        return "no git on PATH"
    if git("rev-parse", "--git-dir").returncode != 0:
        return f"{ROOT} is not a git clone"
    if git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode != 0:
        return f"no commit {rev} in this clone"
    return None


def describe(rev: str) -> tuple[str, str]:
    """The peer's name in a table ("baseline 05333b9"), and what it is when it is the default
    baseline (" (the code before issue #36's CPU cuts)"), else ""."""
    peer = f"baseline {git('rev-parse', '--short', rev).stdout.strip()}"
    full = git("rev-parse", f"{rev}^{{commit}}").stdout.strip()
    return peer, " (the code before issue #36's CPU cuts)" if full == BASELINE else ""


@contextlib.contextmanager
def checkout(rev: str) -> Iterator[Path]:
    """`rev` in a temporary, detached git worktree, compiled, removed however the block ends."""
    scratch = Path(tempfile.mkdtemp(prefix="faultlab-bench-baseline-"))
    path = scratch / "checkout"
    try:
        added = git("worktree", "add", "--detach", str(path), rev)
        if added.returncode != 0:
            raise RuntimeError(f"git worktree add {rev}: {added.stderr.strip()}")
        compile_modules(path)
        yield path
    finally:
        git("worktree", "remove", "--force", str(path))
        shutil.rmtree(scratch, ignore_errors=True)
        git("worktree", "prune")


def compile_modules(checkout: Path) -> None:
    """Compile a checkout's modules. A fresh checkout has no __pycache__: its first run would
    compile the modules it imports and count that CPU (all of faultlab/, 242 modules, took 0.3 s
    here: a seventh of a plain run)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "faultlab")],
                   capture_output=True, check=False)
