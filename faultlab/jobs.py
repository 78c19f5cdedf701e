"""A suite's runs, planned, split into shards, and run one after another or several at once.

A planned run is a profile file and its repeat number. `--shard K/N` keeps every N-th of the
runs sorted by profile name, path and repeat, from the K-th: the same split on every machine, as
even as can be. `--jobs N` runs each in a `faultlab run` process of its own (its own labs, event
loop and interpreter: two cores serve two runs' Python, and a crash ends one run only), up to N at
once; a run's lab leases its own slot, so labs never share names or addresses. What a run
produced comes back through its result.json (`faultlab.report.record`), as from a shard made on
another machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from faultlab.interrupt import uncancelled
from faultlab.profile import Profile
from faultlab.report.record import RecordError, RunRecord

# Seconds a job's faultlab gets to tear its lab down after SIGTERM before it is killed.
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class PlannedRun:
    profile: Profile
    repeat: int  # 0 for the first run of the profile

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.profile.name, str(self.profile.path or ""), self.repeat)


def plan(profiles: Sequence[Profile], repeat: int) -> list[PlannedRun]:
    """Each profile `repeat` times, profile after profile (the order runs are reported in)."""
    return [PlannedRun(p, i) for p in profiles for i in range(repeat)]


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` with 1 <= K <= N; else a ValueError that says so."""
    k, sep, n = text.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise ValueError(f"{text!r} is not a shard: K/N with 1 <= K <= N, e.g. 2/4")
    return int(k), int(n)


def shard(runs: Sequence[PlannedRun], k: int, n: int) -> list[PlannedRun]:
    """The K-th of N shards: stable on every machine, and the N shards together are all runs."""
    chosen = {r.key for i, r in enumerate(sorted(runs, key=lambda r: r.key)) if i % n == k - 1}
    return [r for r in runs if r.key in chosen]


def default_jobs() -> int:
    """Runs at once when `--jobs` is not given a number: a run mostly waits (on timers, the
    network, its client), so two per core, at most 8."""
    return min(2 * (os.cpu_count() or 1), 8)


class Progress:
    """What a parallel suite shows while it runs: on a terminal one status line, rewritten
    (done, running, failed, elapsed, estimate); elsewhere nothing until each run's own lines."""

    def __init__(self, total: int, jobs: int, live: bool) -> None:
        self.total = total
        self.jobs = jobs
        self.live = live
        self.started = time.monotonic()
        self.done = self.running = self.failed = 0
        self._durations: list[float] = []

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        text = (f"[{self.done}/{self.total} done, {self.running} running, {self.failed} failed, "
                f"{_clock(elapsed)} elapsed")
        if self._durations and self.done < self.total:
            mean = sum(self._durations) / len(self._durations)
            left = mean * (self.total - self.done) / max(1, min(self.jobs, self.total - self.done))
            text += f", ~{_clock(left)} left"
        return text + "]"

    def show(self) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[2K" + self.line())
            sys.stderr.flush()

    def clear(self) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()

    def started_one(self) -> None:
        self.running += 1
        self.show()

    def finished_one(self, record: RunRecord) -> None:
        self.running -= 1
        self.done += 1
        self.failed += record.verdict != "PASS"
        self._durations.append(record.duration_s)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


async def run_parallel(runs: Sequence[PlannedRun], runs_dir: Path, jobs: int,
                       client_image: str | None, report: Callable[[RunRecord], None],
                       progress: Progress) -> list[RunRecord]:
    """Run `runs`, up to `jobs` at once, each as its own `faultlab run`; `report` is told of each
    run as it ends (in the order they end); the records come back in the planned order. Cancelled
    (by a signal), it stops every running job with SIGTERM, so each tears its lab down."""
    gate = asyncio.Semaphore(jobs)
    records: dict[int, RunRecord] = {}

    async def one(index: int, run: PlannedRun) -> None:
        async with gate:
            progress.started_one()
            record = await _job(run, runs_dir, client_image)
            progress.finished_one(record)
            progress.clear()
            report(record)
            progress.show()
            records[index] = record

    tasks = [asyncio.create_task(one(i, r)) for i, r in enumerate(runs)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await uncancelled(asyncio.gather(*tasks, return_exceptions=True))
        progress.clear()
    return [records[i] for i in range(len(runs))]


async def _job(run: PlannedRun, runs_dir: Path, client_image: str | None) -> RunRecord:
    """One run in a `faultlab run` of its own; its record, or an ERROR record if it made none."""
    assert run.profile.path is not None, "a parallel run reads its profile from its file"
    with tempfile.TemporaryDirectory(prefix="faultlab-job-") as scratch:
        told = Path(scratch) / "result-path"
        argv = [sys.executable, "-m", "faultlab", "run", "-q", "--jobs", "1", "--runs-dir",
                str(runs_dir), "--report-to", str(told), str(run.profile.path)]
        if client_image is not None:
            argv[4:4] = ["--client-image", client_image]
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        try:
            output, _ = await proc.communicate()
        except asyncio.CancelledError:
            await uncancelled(_stop(proc))
            raise
        path = told.read_text().strip() if told.exists() else ""
    if path:
        with contextlib.suppress(RecordError):
            return RunRecord.load(Path(path))
    last = output.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    return RunRecord(profile=run.profile.name, verdict="ERROR", exit_code=3,
                     run_dir="", started="", duration_s=round(time.monotonic() - started, 3),
                     profile_path=str(run.profile.path),
                     error=f"faultlab run exited {proc.returncode} with no result: {last[0]}")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
