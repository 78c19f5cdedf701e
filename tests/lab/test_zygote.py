"""Warm lab processes (faultlab.lab.zygote): a warm job's emulator and proxy are forked from
its zygote, do what cold ones do (their logs, the proxy's TLS key log, their exit codes), and
die with the job however it ends."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from faultlab.jobs import run_job
from faultlab.profile import load_profile
from faultlab.warm import WarmJob

from ..conftest import PROFILES, faultlab, patience
from .helpers import lab_traces, pid_alive, run_events, run_slot

pytestmark = pytest.mark.lab


def test_a_warm_job_forks_its_emulator_and_proxy_which_do_what_cold_ones_do(
        tmp_path: Path) -> None:
    """Field P1 as a suite's job: the target (the emulator) and the proxy are forked, the
    client is started cold; the emulator's log, the proxy's key log (both legs' TLS secrets,
    which mitmproxy reads from the environment) and their exits are as a cold run's."""
    record = run_job(load_profile(PROFILES / "field" / "P1.yaml"), tmp_path)
    assert record.verdict == "PASS", record.error
    run = Path(record.run_dir)
    events = run_events(run)
    started = {str(e["role"]): e for e in events if e["event"] == "process.start"}
    assert {role: e.get("forked", False) for role, e in started.items()} == {
        "target": True, "proxy": True, "client": False}
    assert "listening on port" in (run / "target.log").read_text()
    # One secret line per TLS connection and leg: the client's leg and the emulator's.
    secrets = [line for line in (run / "keys.log").read_text().splitlines()
               if line.startswith("CLIENT_TRAFFIC_SECRET_0")]
    assert len(secrets) >= 2, (run / "keys.log").read_text()
    ended = {str(e["role"]): e for e in events if e["event"] == "process.exit"}
    for role in ("target", "proxy"):
        assert ended[role]["code"] == 0 and ended[role]["stopped_by_run"] is True, ended[role]
    assert not [pid for e in started.values() if pid_alive(pid := int(str(e["pid"])))]


KILLED = """\
name: warm-killed
target: {emulator: {time_scale: 0.1}}
client: {command: [sleep, '60']}
timeout: 90s
"""


def test_a_warm_job_killed_takes_its_zygote_and_lab_processes_with_it(tmp_path: Path) -> None:
    """SIGKILL to a warm job while its forked emulator serves: the zygote and the emulator die
    with it (the death signal), as the cold client does; `lab gc` then clears its lab."""
    profile = tmp_path / "killed.yaml"
    profile.write_text(KILLED)
    runs = tmp_path / "runs"

    async def go() -> tuple[int, Path, int]:
        job = WarmJob(["run", "-q", "--runs-dir", str(runs), str(profile)], tmp_path / "out")
        await asyncio.to_thread(job.start)
        async with asyncio.timeout(patience(30)):
            while not (found := [p for p in runs.glob("*/events.jsonl")
                                 if '"role": "client"' in p.read_text()]):
                await asyncio.sleep(0.05)
        target = next(int(str(e["pid"])) for e in run_events(found[0].parent)
                      if e["event"] == "process.start" and e["role"] == "target")
        zygote = _parent(target)
        job.send_signal(signal.SIGKILL)
        return await job.wait(), found[0].parent, zygote

    code, run, zygote = asyncio.run(go())
    assert code == -signal.SIGKILL
    events = run_events(run)
    pids = [int(str(e["pid"])) for e in events if e["event"] == "process.start"]
    assert [e.get("forked") for e in events if e["event"] == "process.start"] == [True, None]
    owner = int(str(next(e for e in events if e["event"] == "run.start")["pid"]))
    assert zygote not in (owner, *pids)
    deadline = time.monotonic() + patience(10)
    while [pid for pid in [zygote, *pids] if pid_alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in [zygote, *pids] if pid_alive(pid)], (zygote, pids)
    done = faultlab("lab", "gc")
    assert done.returncode == 0, done.stderr
    assert lab_traces(run_slot(run), owner) == []


def _parent(pid: int) -> int:
    """The parent of a running process."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
