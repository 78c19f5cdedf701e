"""One run, from a validated profile to a verdict, in docs/design.md's six steps: the lab, the target,
the proxy, the capture, the client, the timeline; then the verdict and the report.

Each step is a context entered on one stack, so teardown always runs, in reverse, on success,
failure, Ctrl-C and SIGTERM; a signal that comes during teardown does not cut it (`Teardown`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

from faultlab.capture.live import LiveCapture
from faultlab.cassette.build import cassette_of_run
from faultlab.errors import FaultlabError, LabError, ProfileError
from faultlab.events import Event, EventBus, RunClock
from faultlab.expect import RunFacts, evaluate
from faultlab.injector import FaultRuntime
from faultlab.interrupt import uncancelled
from faultlab.lab import LABS, Lab, LabSpec
from faultlab.lab.process import LabProcess
from faultlab.launch import Launcher
from faultlab.private import PRIVATE_DIR, redact_process_files
from faultlab.profile import Profile, unset_pass_env
from faultlab.proxy.control import ProxyControl
from faultlab.proxy.launch import launch_proxy
from faultlab.report.build import write_run_reports
from faultlab.report.record import RunRecord
from faultlab.result import RunResult
from faultlab.sources import EventTails, FrameSource
from faultlab.timeline import Due, Timeline
from faultlab.vocabulary.run import (
    LabReady,
    RunEnd,
    RunError,
    RunInterrupted,
    RunStart,
    RunTeardown,
    RunTimeout,
)
from faultlab.vocabulary.server import CassetteFailed, CassetteWritten


def make_run_dir(runs_dir: Path, name: str, started: datetime) -> Path:
    base = runs_dir / f"{started:%Y%m%d-%H%M%S}-{name}"
    for n in range(1000):
        candidate = base if n == 0 else base.with_name(f"{base.name}.{n}")
        try:
            candidate.mkdir(parents=True, mode=PRIVATE_DIR)
            return candidate
        except FileExistsError:
            continue
    raise LabError(f"cannot make a run folder under {runs_dir}")


class Teardown(AsyncExitStack):
    """The run's exit stack: its unwinding runs to its end even when the run is cancelled (by
    SIGINT or SIGTERM) meanwhile; the cancellation is raised after it."""

    async def __aexit__(self, *exc_details: Any) -> bool | None:
        return await uncancelled(super().__aexit__(*exc_details))


class Run:
    """Executes one profile; `execute` always tears the lab down and writes the report."""

    def __init__(self, profile: Profile, runs_dir: Path,
                 progress: Callable[[Event], None] | None = None, timeline: bool = True) -> None:
        self.profile = profile
        # Whether the report draws timeline.png (report.html shows the run either way).
        self.draws_timeline = timeline
        self.started = datetime.now()
        self.run_dir = make_run_dir(runs_dir, profile.name, self.started)
        self.clock = RunClock()
        self.bus = EventBus(self.clock, self.run_dir / "events.jsonl")
        if progress is not None:
            self.bus.subscribe(progress)
        self.tails = EventTails(self.bus)
        self.timeline = Timeline(profile.timeline, profile.protocol.kind_matches)
        self.result = RunResult(profile, self.run_dir, self.started)
        # The run for machines (result.json), once it is judged: however the run ended.
        self.record: RunRecord | None = None
        self._failed = asyncio.Event()
        self._alive_at_end: frozenset[str] = frozenset()
        self._processes: dict[str, LabProcess] = {}
        # What the timeline observes before the faults can be applied waits here.
        self._faults: FaultRuntime | None = None
        self._frames: FrameSource | None = None
        self._due: list[Due] = []

    async def execute(self) -> RunResult:
        p = self.profile
        # unix_time maps the run clock onto the capture's timestamps: ts = unix_time + t.
        self.bus.announce("faultlab", RunStart(p.name, str(p.path or ""), os.getpid(),
                                               round(self.clock.t0_wall, 6)))
        try:
            await self._run()
        except FaultlabError as exc:
            self._fail(str(exc))
            self.bus.announce("faultlab", RunError(str(exc)))
        except asyncio.CancelledError:
            # After `run.teardown` the verdict's evidence was complete: it stands.
            during = "teardown" if self.result.observed_until < float("inf") else "run"
            if during == "run":
                self.result.error = "interrupted before the run ended"
            self.bus.announce("faultlab", RunInterrupted(during))
            raise
        finally:
            self._judge()
        return self.result

    async def _run(self) -> None:
        p = self.profile
        if unset := unset_pass_env(p):  # before any lab (the CLI refuses these up front too)
            raise ProfileError(unset)
        async with Teardown() as stack:
            lab = await self._build_lab(stack)
            self.bus.subscribe(self._observe)
            follow = asyncio.create_task(self.tails.follow())
            follow.add_done_callback(self._follow_ended)
            stack.push_async_callback(_cancelled, follow)
            launcher = Launcher(p, lab, self.run_dir, self.bus, self.tails, stack)
            # The microphone's clips are written first: an emulator target learns them as speech.
            mic = await launcher.start_mic() if p.mic is not None else None
            # Every program started from here (an app's server, which hands its page the URLs,
            # too) is given the TURN server's URLs and credentials.
            turn = launcher.prepare_turn() if "turn" in p.needs else None
            # It listens before the target, which may be the page's server; after a target in
            # an image, whose container takes the server's network along with its link.
            imaged = p.target is not None and p.target.image is not None
            if turn is not None and not imaged:
                await turn.start()
            processes = self._processes
            if p.target is not None and p.target.kind.in_lab:
                processes["target"] = await launcher.start_target()
            if turn is not None and imaged:
                await turn.start()
            proxy = await self._start_proxy(lab, launcher, stack) if "proxy" in p.needs else None
            resolver = await launcher.start_resolver() if "dns" in p.needs else None
            table = launcher.connection_table()
            self._faults = faults = FaultRuntime(lab, table, self.bus, proxy, mic, p.timeline,
                                                 self._fail, resolver, turn)
            # The faults are reverted after the capture has stopped: it shows the path as the
            # run left it, not a server's retransmission that the teardown's revert let through.
            stack.push_async_callback(faults.close)
            if turn is not None:  # first at teardown: a turn_down reverted then stays down
                stack.callback(turn.retire)
            await stack.enter_async_context(LiveCapture(
                lab, self.run_dir / "capture.pcap" if p.capture.pcap else None,
                p.capture.snaplen_bytes, self.bus,
                self.run_dir / "server.pcap" if p.capture.server_pcap else None, table))
            self._frames = FrameSource.for_run(
                proxy is not None, p.target.kind.frame_log if p.target is not None else None,
                table, p.target.listen_port if p.target else 0, p.protocol)
            await faults.arm(self.timeline.armed)
            processes["client"] = client = await launcher.start_client(proxy is not None)
            self._schedule(self.timeline.start(client.started_at))
            await self._wait_client(client)
            # Let the target and the capture report what the client's end caused.
            await asyncio.sleep(p.settle)
            self.tails.drain()
            # Expectations judge what happened up to here; what stopping the lab causes (the
            # target seeing its connections end) is recorded but not judged.
            self.result.observed_until = self.bus.announce("faultlab", RunTeardown()).t
            self._alive_at_end = frozenset(r for r, proc in processes.items() if proc.alive)
            self.result.exit_codes = {role: proc.returncode for role, proc in processes.items()}

    async def _build_lab(self, stack: AsyncExitStack) -> Lab:
        network = self.profile.network
        subnets = (network.subnets.client, network.subnets.server) if network.subnets else None
        kind = self.profile.target_kind
        uplink = kind.uplink
        started = time.perf_counter()
        lab = await stack.enter_async_context(LABS[self.profile.backend].build(
            LabSpec(subnets, network.sysctl, self.run_dir.name, uplink)))
        self.bus.announce("faultlab", LabReady(round((time.perf_counter() - started) * 1000, 1),
                                               lab.describe()))
        return lab

    async def _start_proxy(self, lab: Lab, launcher: Launcher,
                           stack: AsyncExitStack) -> ProxyControl:
        target = self.profile.target
        assert target is not None  # the profile refuses a proxy without a target
        proxy = await launch_proxy(
            lab, target.listen_port, launcher.ca, self.run_dir,
            self.tails.add(self.run_dir / "proxy.events.jsonl", "proxy"), self.bus, stack,
            launcher.upstream_ca(), self.profile.protocol, launcher.proxy_tape)
        return proxy

    def _observe(self, event: Event) -> None:
        dues = self.timeline.observe(event)
        frame = self._frames.frame(event) if self._frames is not None else None
        if frame is not None:
            dues += self.timeline.observe_frame(frame, event.t)
        self._schedule(dues)

    def _schedule(self, dues: list[Due]) -> None:
        """Hand due steps to the faults, or keep them until the faults can be applied (a step on
        an event of the target's start)."""
        self._due += dues
        if self._faults is not None:
            for due in self._due:
                self._faults.schedule(due)
            self._due.clear()

    def _follow_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._fail(f"reading the processes' events failed: {task.exception()!r}")

    async def _wait_client(self, client: LabProcess) -> None:
        remaining = self.profile.timeout - (self.clock.now() - client.started_at)
        waiters = [asyncio.ensure_future(client.wait()),
                   asyncio.ensure_future(self._failed.wait())]
        done, pending = await asyncio.wait(waiters, timeout=max(0.0, remaining),
                                           return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()
        if not done:
            self.bus.announce("faultlab", RunTimeout(self.profile.timeout))

    def _fail(self, error: str) -> None:
        """The lab or a mechanism failed: the run ends now, as an error."""
        if self.result.error is None:
            self.result.error = error
        self._failed.set()

    def _judge(self) -> None:
        """The verdict, the `run.end` event and the report, whatever happened before."""
        p, result = self.profile, self.result
        result.duration_s = self.clock.now()
        result.endings = {role: proc.ending for role, proc in self._processes.items()
                          if proc.ending is not None}
        if p.record:
            self._write_cassette()
        result.events = list(self.bus.events)
        result.unfired = self.timeline.unfired(result.events)
        if result.error is None:
            result.outcomes = evaluate(p.expect, RunFacts(result.observed, result.exit_codes,
                                                          self._alive_at_end, p.protocol))
        self.bus.announce("faultlab", RunEnd(result.verdict, round(result.duration_s, 3)))
        self.bus.close()
        redact_process_files(self.run_dir)
        record = RunRecord.of(result)
        record.write(self.run_dir)  # first: the verdict stands whatever the drawing does
        write_run_reports(self.run_dir, result.events, record, result, self.draws_timeline)
        self.record = record.with_attachments()
        self.record.write(self.run_dir)

    def _write_cassette(self) -> None:
        """The run's sessions as a cassette, of the tape its target or its proxy wrote."""
        p = self.profile
        emulator = p.target.emulator if p.target is not None else None
        try:
            path = cassette_of_run(self.run_dir, p.protocol.name,
                                   emulator.personality if emulator is not None else None)
        except (OSError, ValueError) as exc:
            self.bus.announce("faultlab", CassetteFailed(str(exc)))
            return
        if path is not None:
            self.bus.announce("faultlab", CassetteWritten(path.name))


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
