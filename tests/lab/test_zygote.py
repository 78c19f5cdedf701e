"""Warm lab processes (faultlab.lab.zygote): the emulator, proxy and peers of a suite's job, of
a lone `faultlab run` and of a run in this pytest worker are forked from a zygote, do what cold
ones do (their logs, the proxy's TLS key log, their exit codes, a `process.start` before what
they did), start cold once the zygote is gone, and die with their parent however it ends."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from faultlab.jobs import run_job
from faultlab.lab.zygote import close_zygote, current, spawn_zygote
from faultlab.profile import load_profile
from faultlab.warm import WarmJob

from ..conftest import PROFILES, faultlab, patience
from .helpers import failed, lab_traces, peers, pid_alive, run_events, run_profile, run_slot

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


def test_a_run_in_this_process_forks_its_peers_from_the_tests_zygote(runs_dir: Path) -> None:
    """A run made in this pytest worker: its echo server and WebSocket client are forked by the
    zygote the tests spawned (a child of this process), each in its place (they talk across the
    lab); the client's exit code comes back through the zygote."""
    result = run_profile("name: forked-peers\n" + peers("1s"), runs_dir)
    assert result.verdict == "PASS", failed(result)
    started = [e for e in result.events if e.name == "process.start"]
    assert [(e.fields["role"], e.fields.get("forked")) for e in started] == [
        ("target", True), ("client", True)]
    zygote = current()
    assert zygote is not None and _parent(zygote.pid) == os.getpid()
    assert result.exit_codes["client"] == 0
    assert [e for e in result.events if e.name == "tcp.connect"]
    # Each runs from its fork on, before the run knows its pid: its `process.start` still comes
    # before anything it did (the client's connection came first under load, and the windows
    # of the client's expectations, which open there, missed it).
    for e in started:
        role = str(e.fields["role"])
        assert e.t < min(x.t for x in result.events if x.source == role), role
    assert "Warning" not in (result.run_dir / "client.log").read_text()


def test_a_run_whose_zygote_died_starts_its_programs_cold(runs_dir: Path) -> None:
    """The tests' zygote killed: the next run in this process starts its echo server and its
    client cold, as if there were none, and passes; a new zygote then serves later runs."""
    zygote = current()
    assert zygote is not None
    os.kill(zygote.pid, signal.SIGKILL)
    try:
        result = run_profile("name: zygote-gone\n" + peers("1s"), runs_dir)
        assert result.verdict == "PASS", failed(result)
        started = [e for e in result.events if e.name == "process.start"]
        assert [(e.fields["role"], e.fields.get("forked")) for e in started] == [
            ("target", None), ("client", None)]
        assert current() is None
    finally:
        close_zygote()
        spawn_zygote()


def test_a_lone_run_forks_its_lab_programs_and_leaves_no_zygote(tmp_path: Path) -> None:
    """`faultlab run` of field P1 in a process of its own: its emulator and proxy are forked by
    the zygote it forked before its run, and its client is not (that nothing outlives such a
    run, its zygote included, is tests/lab/test_signals.py's, whose runs leave no process)."""
    done = faultlab("run", "-q", "--runs-dir", str(tmp_path), str(PROFILES / "field" / "P1.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = [p.parent for p in tmp_path.glob("*/events.jsonl")]
    events = run_events(run)
    started = {str(e["role"]): e for e in events if e["event"] == "process.start"}
    assert {role: e.get("forked", False) for role, e in started.items()} == {
        "target": True, "proxy": True, "client": False}


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

