"""Nothing is left behind: teardown on SIGTERM, and `lab gc` after SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from faultlab.lab.netns import ROOT_NETNS_DIR, NetnsLab, lease_path, scratch_path

from ..conftest import PROFILES, faultlab, patience
from .helpers import host_network_state, lab_traces, pid_alive, run_events, run_slot, start_run

pytestmark = pytest.mark.lab


def test_sigterm_tears_everything_down(tmp_path: Path) -> None:
    """SIGTERM mid-run: exit 143, the lab and its processes are gone, the report is written."""
    before = host_network_state()
    proc, run_dir = start_run(tmp_path)
    assert lab_traces(run_slot(run_dir), proc.pid) != []  # the run's lab, while it runs
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=patience(20))
    assert proc.returncode == 143, err.decode()
    assert b"Traceback" not in err
    evs = run_events(run_dir)
    assert evs[-1]["event"] == "run.end"
    assert any(e["event"] == "fault.reverted" for e in evs)
    pids = [int(e["pid"]) for e in evs if e["event"] == "process.start"]  # type: ignore[call-overload]
    assert pids and not any(pid_alive(p) for p in pids)
    assert "interrupted" in (run_dir / "summary.md").read_text()
    assert lab_traces(run_slot(run_dir), proc.pid) == []
    assert host_network_state() == before


def test_sigkill_then_gc_restores_the_host(tmp_path: Path) -> None:
    """SIGKILL mid-run leaves namespaces; `lab gc` removes them and the host is as before."""
    before = host_network_state()
    proc, run_dir = start_run(tmp_path)
    proc.kill()
    proc.wait(timeout=patience(5))
    slot = run_slot(run_dir)
    names = [f"faultlab-{slot}-{role}" for role in ("client", "router", "server")]
    # The killed run's three namespaces, its scratch folder and its lease, naming its dead pid.
    assert sorted(lab_traces(slot, proc.pid)) == sorted(
        [*names, str(scratch_path(slot)), str(lease_path(slot))])
    done = faultlab("lab", "gc")
    assert done.returncode == 0, done.stderr
    assert all(f"removed namespace {n}" in done.stdout.splitlines() for n in names), done.stdout
    pids = [int(e["pid"]) for e in run_events(run_dir)  # type: ignore[call-overload]
            if e["event"] == "process.start"]
    assert pids and not any(pid_alive(p) for p in pids)
    assert lab_traces(slot, proc.pid) == []
    assert host_network_state() == before
    # A second gc finds nothing of it (other runs' labs may be spared or collected).
    again = faultlab("lab", "gc").stdout
    assert not [line for line in again.splitlines()
                if f"faultlab-{slot}-" in line or line.startswith(f"spared lab {slot}:")], again


def test_gc_spares_the_lab_of_a_live_run() -> None:
    """A lab whose owner is alive is not collected."""

    async def scenario() -> tuple[str, int, list[str]]:
        async with NetnsLab() as lab:
            done = await asyncio.to_thread(faultlab, "lab", "gc")
            names = [ns.name for ns in (lab.client, lab.router, lab.server)]
            return done.stdout, lab.slot, [n for n in names if (ROOT_NETNS_DIR / n).exists()]

    out, slot, still_there = asyncio.run(scenario())
    assert f"spared lab {slot}: run {os.getpid()} is alive" in out.splitlines(), out
    assert len(still_there) == 3


def test_demo_profile_exists() -> None:
    """The README's demo profile is shipped."""
    assert (PROFILES / "silent-loss.yaml").exists()
