"""Time that means the same under load: shipped profiles hold when several runs share the cores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import patience

pytestmark = [pytest.mark.lab, pytest.mark.alone]
PARALLEL = 8


def test_eight_parallel_silent_loss_runs_all_pass(tmp_path: Path) -> None:
    """8 `faultlab run silent-loss` at once on this machine all PASS: the drop counts from the
    client's connection, so a lab, target, capture and client slowed by the load do not move it
    before the client has connected."""
    procs = [subprocess.Popen([sys.executable, "-m", "faultlab", "run", "-q", "silent-loss",
                               "--runs-dir", str(tmp_path / f"runs{i}")],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
             for i in range(PARALLEL)]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=patience(120))
            outputs.append((proc.returncode, out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()  # SIGTERM: the run tears its lab down
                proc.wait(30)
    failed = [out for code, out in outputs if code != 0]
    assert not failed, f"{len(failed)} of {PARALLEL} failed:\n" + "\n".join(failed)
    assert all("== silent-loss: PASS" in out for _, out in outputs)
