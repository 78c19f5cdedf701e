"""A suite's runs, planned, split into shards, and run one after another or several at once.

A planned run is a profile file and its repeat number. `--shard K/N` keeps every N-th of the
runs sorted by profile name, path and repeat, from the K-th: the same split on every machine, as
even as can be. `--jobs N` runs each in a `faultlab run` process of its own (its own labs, event
loop and interpreter: two cores serve two runs' Python, and a crash ends one run only), up to N at
once; a run's lab leases its own slot, so labs never share names or addresses. What a run
produced comes back through its result.json (`faultlab.report.record`), as from a shard made on
another machine. `run_suite` runs a suite either way; a job's own `faultlab run` is told where
to name its record (`--report-to`, hidden: for jobs only).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from faultlab.events import Event
from faultlab.interrupt import uncancelled
from faultlab.private import write_private
from faultlab.profile import Profile
from faultlab.report.record import RESULT_FILE, RecordError, RunRecord, faultlab_version
from faultlab.result import EXIT_LAB
from faultlab.warm import WarmJob

# Seconds a job's faultlab gets to tear its lab down after SIGTERM before it is killed.
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class PlannedRun:
    profile: Profile
    repeat: int  # 0 for the first run of the profile

    @property
    def key(self) -> tuple[str, str, int]:
        """What a shard sorts by: the same on every machine, however the path was written."""
        return (self.profile.name, self.profile.path.name if self.profile.path else "",
                self.repeat)


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
    """The K-th of N shards: stable on every machine, and the N shards together are all runs
    (each once, a profile given twice too)."""
    order = sorted(range(len(runs)), key=lambda i: runs[i].key)  # ties keep the planned order
    chosen = set(order[k - 1::n])
    return [r for i, r in enumerate(runs) if i in chosen]


def parse_jobs(value: str) -> int:
    """`--jobs`: a number of runs at once, 1-64, or `auto` (`default_jobs`); else a ValueError."""
    if value == "auto":
        return default_jobs()
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise ValueError(f"--jobs {value!r}: a number of runs at once, 1-64, or auto")
    return int(value)


def default_jobs() -> int:
    """Runs at once when `--jobs` is not given a number: a run mostly waits (on timers, the
    network, its client), so two per core, at most 8."""
    return min(2 * (os.cpu_count() or 1), 8)


class Progress:
    """What a parallel suite shows while it runs: on a terminal one status line, rewritten
    (done, running, failed, elapsed, estimate); elsewhere nothing until each run's own lines."""

    def __init__(self, total: int, jobs: int, live: bool, label: str = "") -> None:
        self.label = label
        self.total = total
        self.jobs = jobs
        self.live = live
        self.started = time.monotonic()
        self.done = self.running = self.failed = 0
        self._durations: list[float] = []

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        label = f"{self.label}: " if self.label else ""
        text = (f"[{label}{self.done}/{self.total} done, {self.running} running, {self.failed} failed, "
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


def event_line(event: Event) -> str:
    """How a run one at a time shows an event as it comes."""
    fields = " ".join(f"{k}={v}" for k, v in event.fields.items() if k not in ("argv", "path"))
    return f"{event.t:8.3f}  {event.source:<8} {event.name:<22} {fields}"[:160]


@dataclass(frozen=True)
class RunOptions:
    """What `faultlab run`'s options change in every run of a suite (each job's own
    `faultlab run` is given them again): the client's image, whether runs record cassettes,
    whether their reports draw timeline.png."""

    client_image: str | None = None
    record: bool = False
    timeline: bool = True

    def args(self) -> list[str]:
        """The options, as `faultlab run` takes them."""
        return ([*(["--client-image", self.client_image] if self.client_image else []),
                 *(["--record"] if self.record else []),
                 *([] if self.timeline else ["--no-timeline"])])


def runs_here(runs: Sequence[PlannedRun], jobs: int) -> bool:
    """Whether `run_suite` runs `runs` in this process, one after another (not as jobs)."""
    return jobs <= 1 or len(runs) <= 1


async def run_suite(runs: Sequence[PlannedRun], runs_dir: Path, jobs: int, options: RunOptions,
                    records: dict[int, RunRecord], say: Callable[[str], None],
                    report: Callable[[RunRecord], None], quiet: bool,
                    report_to: Path | None = None) -> None:
    """Run `runs`: up to `jobs` at once as jobs (with a status line on a terminal, unless
    `quiet`), or, with one job or one run, one after another in this process, each event `say`n
    as it comes unless `quiet`. `report` is told of each run as it ends and `records` gets it under
    its planned index, also for a run a signal interrupted. A job's own run (`report_to`) first
    writes there where its record will be."""
    if not runs_here(runs, jobs):
        progress = Progress(len(runs), jobs, live=sys.stderr.isatty() and not quiet)
        await run_parallel(runs, runs_dir, jobs, options, report, progress, records)
        return
    from faultlab.runner import Run  # here: a parallel suite's own process never runs one

    for index, planned in enumerate(runs):
        count = f" ({index + 1}/{len(runs)})" if len(runs) > 1 else ""
        say(f"== {planned.profile.name}{count}")
        run = Run(planned.profile, runs_dir, None if quiet else lambda e: say(event_line(e)),
                  options.timeline)
        if report_to is not None:
            report_to.write_text(str(run.run_dir.absolute() / RESULT_FILE) + "\n")
        try:
            await run.execute()
        finally:
            if run.record is not None:  # judged however the run ended
                records[index] = run.record
        report(records[index])


async def run_parallel(runs: Sequence[PlannedRun], runs_dir: Path, jobs: int,
                       options: RunOptions, report: Callable[[RunRecord], None],
                       progress: Progress, records: dict[int, RunRecord]) -> None:
    """Run `runs`, up to `jobs` at once, each as its own `faultlab run`; `report` is told of each
    run as it ends, and `records` gets it under its planned index. Cancelled (by a signal), it
    stops every running job with SIGTERM, so each tears its lab down, and `records` still gets
    what they recorded (their runs, interrupted)."""
    gate = asyncio.Semaphore(jobs)

    async def one(index: int, run: PlannedRun) -> None:
        async with gate:
            progress.started_one()
            job = Job(run.profile, runs_dir, options)
            try:
                await job.run()
            finally:
                if job.record is not None:
                    records[index] = job.record
            assert job.record is not None
            progress.finished_one(job.record)
            progress.clear()
            report(job.record)
            progress.show()

    await gather_shown([one(i, r) for i, r in enumerate(runs)], progress)


async def gather_shown(jobs: Sequence[Coroutine[Any, Any, None]], progress: Progress) -> None:
    """Run `jobs` at once, the status line's clock going on a terminal. Cancelled (by a signal),
    every job is cancelled and awaited to its end (a job stops its `faultlab run` with SIGTERM,
    so each tears its lab down) before this is."""
    tasks = [asyncio.create_task(job) for job in jobs]
    ticker = asyncio.create_task(_tick(progress)) if progress.live else None
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in [*tasks, *([ticker] if ticker else [])]:
            task.cancel()
        await uncancelled(asyncio.gather(*tasks, *([ticker] if ticker else []),
                                         return_exceptions=True))
        progress.clear()


async def _tick(progress: Progress) -> None:
    """Keep the status line's clock going while runs take their time."""
    while True:
        await asyncio.sleep(1.0)
        progress.show()


class Job:
    """One run in a `faultlab run` process of its own; `record` is what it recorded (read from
    its result.json), or an ERROR record that keeps its output when it recorded nothing."""

    def __init__(self, profile: Profile, runs_dir: Path, options: RunOptions) -> None:
        assert profile.path is not None, "a job reads its profile from its file"
        self.profile = profile
        self.runs_dir = runs_dir
        self.options = options
        self.record: RunRecord | None = None

    async def run(self) -> RunRecord:
        with tempfile.TemporaryDirectory(prefix="faultlab-job-") as scratch:
            told = Path(scratch) / "result-path"
            args = ["run", "-q", "--jobs", "1", "--runs-dir", str(self.runs_dir),
                    "--report-to", str(told), *self.options.args(), str(self.profile.path)]
            started = time.monotonic()
            proc = WarmJob(args, Path(scratch) / "output")
            try:
                # The first starts the warm server (~1 s), in a thread; cancelled meanwhile, the
                # job it starts is still stopped below, not left to run unsupervised.
                await uncancelled(asyncio.to_thread(proc.start))
                await proc.wait()
            except asyncio.CancelledError:
                try:
                    await uncancelled(_stop(proc))  # raises again if cancelled meanwhile
                finally:
                    self.record = self._recorded(told, proc.read_output(), proc.returncode,
                                                 started)
                raise
            self.record = self._recorded(told, proc.read_output(), proc.returncode, started)
        return self.record

    def _recorded(self, told: Path, output: bytes, code: int | None, started: float) -> RunRecord:
        # The job names its run's result.json as soon as the run folder exists.
        result = Path(told.read_text().strip()) if told.exists() else None
        if result is not None:
            with contextlib.suppress(RecordError):
                return RunRecord.load(result)
        run_dir = result.parent if result is not None and result.parent.is_dir() else None
        text = output.decode(errors="replace")
        if run_dir is not None and text:
            write_private(run_dir / "job.log", text)
        last = text.strip().splitlines()[-1:] or ["no output"]
        return RunRecord(
            profile=self.profile.name, verdict="ERROR", exit_code=EXIT_LAB,
            run_dir=str(run_dir or ""), started=datetime.now().isoformat(timespec="seconds"),
            duration_s=round(time.monotonic() - started, 3),
            profile_path=str(self.profile.path), backend=self.profile.backend,
            protocol=self.profile.protocol.name,
            error=f"faultlab run exited {code} with no result: {last[0]}"
                  + (f" (its output: {run_dir / 'job.log'})" if run_dir and text else ""),
            faultlab=faultlab_version())


def run_job(profile: Profile, runs_dir: Path, options: RunOptions = RunOptions()) -> RunRecord:
    """One run in a process of its own, from code that has no event loop (the pytest plugin);
    Ctrl-C stops it as a signal stops `faultlab run`, its lab torn down. The job is forked warm
    (`faultlab.warm`): as with any multiprocessing start but fork, a script that calls this
    keeps its own work under `if __name__ == "__main__":` (the job imports the script's module)."""
    return asyncio.run(Job(profile, runs_dir, options).run())


async def _stop(proc: WarmJob) -> None:
    if not proc.started or proc.returncode is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
    except TimeoutError:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
