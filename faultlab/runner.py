"""One run, from a validated profile to a verdict: lab, target, capture, client, timeline, report."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

from faultlab.capture.live import ConnectionTable, LiveCapture
from faultlab.emulator.server import client_environment
from faultlab.errors import FaultlabError, LabError
from faultlab.events import Event, EventBus, EventFileTail, RunClock
from faultlab.expect import RunFacts, evaluate
from faultlab.faults import FAULTS, Fault
from faultlab.lab.netns import Addressing, NetnsLab
from faultlab.lab.process import LabProcess, listening
from faultlab.mic import VirtualMic, write_clips
from faultlab.peers import builtin_command
from faultlab.profile import EmulatorTarget, Profile, Program, Step
from faultlab.proxy.control import ProxyControl
from faultlab.proxy.launch import launch_proxy
from faultlab.report.summary import write_summary
from faultlab.result import RunResult
from faultlab.timeline import Due, Timeline
from faultlab.tls import LabCA

TAIL_POLL_S = 0.01
TARGET_POLL_S = 0.02
# Names the client resolves to an emulator target, so the SDK's default endpoints reach it.
EMULATED_HOSTS = ["generativelanguage.googleapis.com", "aiplatform.googleapis.com",
                  "us-central1-aiplatform.googleapis.com", "europe-west4-aiplatform.googleapis.com"]


class FaultRuntime:
    """The faults a run has applied, and the context they are applied in."""

    def __init__(self, lab: NetnsLab, connections: ConnectionTable, bus: EventBus,
                 proxy: ProxyControl | None, mic: VirtualMic | None, steps: Sequence[Step]) -> None:
        self._lab = lab
        self._connections = connections
        self._proxy = proxy
        self._mic = mic
        self.bus = bus
        self.active: dict[str, Fault[Any]] = {}
        self._steps = {s.id: s for s in steps}
        bus.subscribe(self._adopt)

    @property
    def proxy(self) -> ProxyControl | None:
        return self._proxy

    @property
    def mic(self) -> VirtualMic | None:
        return self._mic

    def _adopt(self, event: Event) -> None:
        """A fault the proxy applied on its own (a content trigger) is reverted like the others."""
        step = self._steps.get(str(event.fields.get("step")))
        if event.source == "proxy" and event.name == "fault.applied" and step is not None:
            fault = FAULTS[step.fault](step.id, step.params)
            if fault.reversible:
                self.active[step.id] = fault

    @property
    def lab(self) -> NetnsLab:
        return self._lab

    @property
    def connections(self) -> ConnectionTable:
        return self._connections

    async def apply(self, due: Due) -> None:
        step = due.step
        fired = time.perf_counter()
        fault = FAULTS[step.fault](step.id, step.params)
        details = await fault.apply(self)
        applied_in_ms = (time.perf_counter() - fired) * 1000
        if fault.reversible:
            self.active[step.id] = fault
        self.bus.emit("faultlab", "fault.applied", step=step.id, fault=step.fault,
                      layer=fault.layer, trigger=due.cause, applied_in_ms=round(applied_in_ms, 3),
                      **details)

    async def revert(self, step_ids: Sequence[str] | None) -> list[str]:
        ids = [s for s in (step_ids if step_ids is not None else list(self.active))
               if s in self.active]
        for step_id in reversed(ids):
            fault = self.active.pop(step_id)
            await fault.revert(self)
            self.bus.emit("faultlab", "fault.reverted", step=step_id, fault=fault.name)
        return ids

    async def revert_all(self) -> None:
        """At teardown: undo what is still applied; a failure is recorded, not raised."""
        try:
            await self.revert(None)
        except FaultlabError as exc:
            self.bus.emit("faultlab", "fault.revert_failed", error=str(exc))


def program_argv(program: Program) -> list[str]:
    base = list(program.command) if program.command else builtin_command(program.builtin or "")
    return base + list(program.args)


def make_run_dir(runs_dir: Path, name: str, started: datetime) -> Path:
    base = runs_dir / f"{started:%Y%m%d-%H%M%S}-{name}"
    for n in range(1000):
        candidate = base if n == 0 else base.with_name(f"{base.name}.{n}")
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            continue
    raise LabError(f"cannot make a run folder under {runs_dir}")


class Run:
    """Executes one profile; `execute` always tears the lab down and writes the report."""

    def __init__(self, profile: Profile, runs_dir: Path,
                 progress: Callable[[Event], None] | None = None) -> None:
        self.profile = profile
        self.started = datetime.now()
        self.run_dir = make_run_dir(runs_dir, profile.name, self.started)
        self.clock = RunClock()
        self.bus = EventBus(self.clock, self.run_dir / "events.jsonl")
        if progress is not None:
            self.bus.subscribe(progress)
        self.timeline = Timeline(s for s in profile.timeline if not self._in_proxy(s))
        self.result = RunResult(profile, self.run_dir, self.started)
        self._failed = asyncio.Event()
        self._tails: list[EventFileTail] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._alive_at_end: frozenset[str] = frozenset()
        self._lab_ca: LabCA | None = None
        self._mic_path: Path | None = None

    async def execute(self) -> RunResult:
        p = self.profile
        # unix_time maps the run clock onto the capture's timestamps: ts = unix_time + t.
        self.bus.emit("faultlab", "run.start", profile=p.name, path=str(p.path or ""),
                      pid=os.getpid(), unix_time=round(self.clock.t0_wall, 6))
        try:
            await self._run()
        except FaultlabError as exc:
            self.result.error = str(exc)
            self.bus.emit("faultlab", "run.error", error=str(exc))
        except asyncio.CancelledError:
            self.result.error = "interrupted before the run ended"
            raise
        finally:
            for task in self._tasks:
                task.cancel()
            self.result.duration_s = self.clock.now()
            applied = {e.fields.get("step") for e in self.bus.events if e.name == "fault.applied"}
            self.result.unfired = [s.id for s in self.timeline.waiting] + [
                s.id for s in p.timeline if self._in_proxy(s) and s.id not in applied]
            self.result.events = list(self.bus.events)
            facts = RunFacts(self.result.observed, self.result.exit_codes, self._alive_at_end)
            if self.result.error is None:
                self.result.outcomes = evaluate(p.expect, facts)
            self.bus.emit("faultlab", "run.end", verdict=self.result.verdict,
                          duration_s=round(self.result.duration_s, 3))
            self.bus.close()
            write_summary(self.result, self.run_dir / "summary.md")
        return self.result

    async def _run(self) -> None:
        p = self.profile
        addressing = None
        if p.network.subnets is not None:
            addressing = Addressing(p.network.subnets.client, p.network.subnets.server)
        async with AsyncExitStack() as stack:
            started = time.perf_counter()
            lab = await stack.enter_async_context(NetnsLab(addressing, p.network.sysctl))
            self.bus.emit("faultlab", "lab.ready", backend="netns", slot=lab.slot,
                          setup_ms=round((time.perf_counter() - started) * 1000, 1),
                          client=str(lab.addressing.client), server=str(lab.addressing.server))
            pcap = self.run_dir / "capture.pcap" if p.capture.pcap else None
            capture = await stack.enter_async_context(LiveCapture(
                lab.router, lab.client_link, pcap, p.capture.snaplen_bytes, self.bus,
                lab.client_address, lab.server_address))
            proxy = await self._start_proxy(lab, stack) if self._needs_proxy() else None
            mic = await self._start_mic(stack) if p.mic is not None else None
            faults = FaultRuntime(lab, capture.table, self.bus, proxy, mic, p.timeline)
            if proxy is not None:
                await proxy.call("arm", steps=[self._armed(s) for s in p.timeline
                                               if self._in_proxy(s)])
            stack.push_async_callback(faults.revert_all)
            self.bus.subscribe(lambda event: self._on_event(event, faults))
            self._spawn(self._tail_loop())
            processes: dict[str, LabProcess] = {}
            if p.target is not None:
                processes["target"] = await self._start("target", lab, p.target, stack)
                await self._wait_target_ready(processes["target"], p.target.listen_port,
                                              p.target.ready_timeout)
            for due in self.timeline.start():
                self._schedule(due, faults)
            processes["client"] = await self._start("client", lab, p.client, stack)
            await self._wait_client(processes["client"])
            # Let the target and the capture report what the client's end caused.
            await asyncio.sleep(p.settle)
            self._drain_tails()
            # Expectations judge what happened up to here; what stopping the lab causes (the
            # target seeing its connections end) is recorded but not judged.
            self.result.observed_until = self.bus.emit("faultlab", "run.teardown").t
            self._alive_at_end = frozenset(r for r, proc in processes.items() if proc.alive)
            for role, proc in processes.items():
                self.result.exit_codes[role] = proc.returncode

    async def _start(self, role: str, lab: NetnsLab, program: Program,
                     stack: AsyncExitStack) -> LabProcess:
        p = self.profile
        events_file = self.run_dir / f"{role}.events.jsonl"
        events_file.touch()
        self._tails.append(EventFileTail(events_file, role))
        env = dict(os.environ)
        env.update({
            "FAULTLAB_EVENTS": str(events_file), "FAULTLAB_RUN_DIR": str(self.run_dir),
            "FAULTLAB_ROLE": role, "FAULTLAB_T0": f"{self.clock.t0_wall:.6f}",
            "FAULTLAB_TARGET_HOST": str(lab.server_address),
        })
        names = list(p.hosts)
        argv = None
        if p.target is not None:
            port = p.target.listen_port
            env["FAULTLAB_TARGET_PORT"] = str(port)
            env["FAULTLAB_TARGET"] = f"{lab.server_address}:{port}"
            if p.target.emulator is not None:
                names += EMULATED_HOSTS
                if role == "client":
                    env.update(self._emulator_client_env(port))
                else:
                    argv = self._emulator_argv(p.target.emulator, lab, port)
                    env["SSLKEYLOGFILE"] = str(self.run_dir / "emulator-keys.log")
        if role == "client" and self._mic_path is not None:
            env["FAULTLAB_MIC"] = str(self._mic_path)
        env.update(program.env)
        ns = lab.client if role == "client" else lab.server
        hosts = None
        if role == "client":
            hosts = self.run_dir / "hosts"
            hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n"
                             + (f"{lab.server_address}\t{' '.join(names)}\n" if names else ""))
        proc = await LabProcess.start(role, ns, argv or program_argv(program), env, hosts,
                                      self.run_dir / f"{role}.log", self.bus)
        stack.push_async_callback(proc.stop)
        return proc

    def _needs_proxy(self) -> bool:
        return self.profile.proxy or any(FAULTS[s.fault].layer == "app"
                                         for s in self.profile.timeline)

    @staticmethod
    def _in_proxy(step: Step) -> bool:
        """Steps on a frame with an app-level fault fire inside the proxy, in its message hook."""
        return step.when.frame is not None and FAULTS[step.fault].layer == "app"

    @staticmethod
    def _armed(step: Step) -> dict[str, Any]:
        assert step.when.frame is not None
        return {"step": step.id, "fault": step.fault, "after_s": step.after,
                "params": step.params.model_dump(mode="json", by_alias=True),
                "match": step.when.frame.model_dump(mode="json", by_alias=True)}

    async def _start_proxy(self, lab: NetnsLab, stack: AsyncExitStack) -> ProxyControl:
        if self.profile.target is None:
            raise LabError("a proxy needs a target to stand in front of")
        events_file = self.run_dir / "proxy.events.jsonl"
        events_file.touch()
        self._tails.append(EventFileTail(events_file, "proxy"))
        return await launch_proxy(
            lab, self.profile.target.listen_port, self._ca(), self.run_dir, events_file, self.bus,
            stack, verify_with_lab_ca=self.profile.target.emulator is not None)

    async def _start_mic(self, stack: AsyncExitStack) -> VirtualMic:
        mic = self.profile.mic
        assert mic is not None
        clips = await asyncio.to_thread(write_clips, mic.utterances, self._speech_dir)
        virtual = VirtualMic(mic.utterances, clips, mic.gap, mic.tail, self.bus)
        stack.push_async_callback(virtual.close)
        self._mic_path = await virtual.serve(self.run_dir)
        return virtual

    @property
    def _speech_dir(self) -> Path:
        """The microphone's clips, also registered with an emulator target."""
        return self.run_dir / "speech"

    def _emulator_argv(self, emulator: EmulatorTarget, lab: NetnsLab, port: int) -> list[str]:
        argv = [sys.executable, "-m", "faultlab", "emulator", "serve", "--host",
                str(lab.server_address), "--port", str(port), "--personality", emulator.personality,
                "--time-scale", f"{emulator.time_scale:g}", "--ca-dir", str(self._ca().directory)]
        if emulator.utterances is not None:
            base = self.profile.path.parent if self.profile.path else Path.cwd()
            argv += ["--utterances", str(base / emulator.utterances)]
        if self.profile.mic is not None:
            argv += ["--utterances", str(self._speech_dir)]
        if emulator.seed is not None:
            argv += ["--seed", str(emulator.seed)]
        for key, value in emulator.overrides.items():
            argv += ["--set", f"{key}={json.dumps(value)}"]
        return argv

    def _emulator_client_env(self, port: int) -> dict[str, str]:
        """An unmodified SDK client reaches the emulator under the service's own name."""
        suffix = "" if port == 443 else f":{port}"
        return client_environment(str(self._ca().cert_path),
                                  f"https://{EMULATED_HOSTS[0]}{suffix}")

    def _ca(self) -> LabCA:
        """The run's own CA: the emulator's certificate and the client's trust."""
        if self._lab_ca is None:
            self._lab_ca = LabCA(self.run_dir / "ca")
        return self._lab_ca

    async def _wait_target_ready(self, target: LabProcess, port: int, timeout_s: float) -> None:
        deadline = self.clock.now() + timeout_s
        while not listening(target.proc.pid, port):
            if not target.alive:
                raise LabError(f"the target exited with code {target.returncode} before "
                               f"listening on port {port}; see {self.run_dir / 'target.log'}")
            if self.clock.now() > deadline:
                raise LabError(f"the target did not listen on port {port} within "
                               f"{timeout_s:g}s; see {self.run_dir / 'target.log'}")
            await asyncio.sleep(TARGET_POLL_S)
        self.bus.emit("faultlab", "target.ready", port=port)

    async def _wait_client(self, client: LabProcess) -> None:
        remaining = self.profile.timeout - self.clock.now()
        waiters = [asyncio.ensure_future(client.wait()),
                   asyncio.ensure_future(self._failed.wait())]
        done, pending = await asyncio.wait(waiters, timeout=max(0.0, remaining),
                                           return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()
        if not done:
            self.bus.emit("faultlab", "run.timeout", timeout_s=self.profile.timeout)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_event(self, event: Event, faults: FaultRuntime) -> None:
        if event.name == "fault.failed" and event.source == "proxy":
            # A fault the proxy fired on a frame could not be applied: the lab failed.
            self.result.error = (f"step {event.fields.get('step')} ({event.fields.get('fault')}):"
                                 f" {event.fields.get('error')}")
            self._failed.set()
        for due in self.timeline.observe(event):
            self._schedule(due, faults)

    def _schedule(self, due: Due, faults: FaultRuntime) -> None:
        async def fire() -> None:
            await asyncio.sleep(max(0.0, due.t - self.clock.now()))
            try:
                await faults.apply(due)
            except Exception as exc:  # any failure of a fault ends the run as a lab failure
                message = str(exc) if isinstance(exc, FaultlabError) else repr(exc)
                self.bus.emit("faultlab", "fault.failed", step=due.step.id, fault=due.step.fault,
                              error=message)
                self.result.error = f"step {due.step.id} ({due.step.fault}): {message}"
                self._failed.set()

        self._spawn(fire())

    def _drain_tails(self) -> None:
        for tail in self._tails:
            for data in tail.read_new():
                name = str(data.pop("event"))
                ts = data.pop("ts", None)
                t = self.clock.from_wall(ts) if isinstance(ts, int | float) else None
                self.bus.record(tail.source, name, t, data)

    async def _tail_loop(self) -> None:
        while True:
            self._drain_tails()
            await asyncio.sleep(TAIL_POLL_S)
