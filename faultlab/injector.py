"""Applying a run's faults: each step's fault when it is due, reverts, and the return to health.

The run holds the faults it applied itself; a fault that lives in another process (the proxy's)
is held there, and the run asks that process to revert it. Steps that must fire inside the proxy
(`Timeline.armed`) are armed there, and announce themselves as every step does
(`FaultApplied.of`). Whatever is still applied when the run ends is reverted before the lab goes,
and a fault that fails ends the run as a lab failure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from faultlab.connections import ConnectionTable, Upstream
from faultlab.errors import FaultlabError
from faultlab.events import Event, EventBus
from faultlab.faults import FAULTS, Fault
from faultlab.faults.base import ResolverChannel, TurnChannel
from faultlab.lab.base import Lab
from faultlab.profile import Step
from faultlab.proxy.control import ArmedStep, ProxyControl
from faultlab.timeline import Due
from faultlab.vocabulary.run import FaultApplied, FaultFailed, FaultReverted, FaultRevertFailed, ProxyUpstream

if TYPE_CHECKING:
    from faultlab.mic import VirtualMic  # numpy: only a run with a microphone imports it


class FaultRuntime:
    """The faults a run has applied, and the context they are applied in (a `FaultContext`)."""

    def __init__(self, lab: Lab, connections: ConnectionTable, bus: EventBus,
                 proxy: ProxyControl | None, mic: VirtualMic | None, steps: Sequence[Step],
                 on_failure: Callable[[str], None], resolver: ResolverChannel | None = None,
                 turn: TurnChannel | None = None) -> None:
        self.lab = lab
        self.connections = connections
        self.proxy = proxy
        self.mic = mic
        self.resolver = resolver
        self.turn = turn
        self.bus = bus
        self.active: dict[str, Fault[Any]] = {}
        self._faults = {s.id: s.fault for s in steps}
        self._on_failure = on_failure
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        bus.subscribe(self._watch_proxy)

    async def arm(self, steps: Sequence[Step]) -> None:
        """Hand the proxy the steps it fires inside its message hook (before the client starts):
        a `freeze` on `forward: before` holds the matching message itself back."""
        if steps:
            assert self.proxy is not None  # the profile refuses a frame step without the proxy
            await self.proxy.arm([ArmedStep.of(s.id, s.fault, s.params, match=s.when.frame,
                                               after_s=s.after) for s in steps])

    def _watch_proxy(self, event: Event) -> None:
        if self._closed or event.source != "proxy":
            return
        upstream = ProxyUpstream.read(event)
        if upstream is not None:
            # The server leg of a proxied connection, for the packet faults that hurt it.
            self.connections.observe_upstream(upstream.client_port, Upstream(
                upstream.upstream, upstream.upstream_port, upstream.server, upstream.server_port))
        failed = FaultFailed.read(event)
        if failed is not None:
            # A step the proxy fired on a frame could not be applied: the lab failed.
            self._on_failure(f"step {failed.step} ({failed.fault}): {failed.error}")

    def schedule(self, due: Due) -> None:
        """Apply `due`'s fault at its time (run clock); nothing once the run is closing."""
        if self._closed:
            return

        async def fire() -> None:
            await asyncio.sleep(max(0.0, due.t - self.bus.clock.now()))
            try:
                await self.apply(due)
            except Exception as exc:  # any failure of a fault ends the run as a lab failure
                message = str(exc) if isinstance(exc, FaultlabError) else repr(exc)
                self.bus.announce("faultlab", FaultFailed(due.step.id, due.step.fault, message))
                self._on_failure(f"step {due.step.id} ({due.step.fault}): {message}")

        task = asyncio.create_task(fire())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def apply(self, due: Due) -> None:
        step = due.step
        fired = time.perf_counter()
        fault = FAULTS[step.fault](step.id, step.params)
        details = await fault.apply(self)
        applied_in_ms = (time.perf_counter() - fired) * 1000
        if fault.held_by_run:
            self.active[step.id] = fault
        self.bus.announce("faultlab", FaultApplied.of(fault, due.cause, applied_in_ms, details))

    async def revert(self, step_ids: Sequence[str] | None) -> list[str]:
        """Revert the named faults (all when None): those the run holds, the latest first, then
        those the proxy holds. Every one is tried; the first failure is raised after."""
        here = [s for s in reversed(self.active) if step_ids is None or s in step_ids]
        reverted: list[str] = []
        failures: list[FaultlabError] = []
        for step_id in here:
            fault = self.active.pop(step_id)
            try:
                await fault.revert(self)
            except FaultlabError as exc:
                failures.append(exc)
                continue
            reverted.append(step_id)
            self.bus.announce("faultlab", FaultReverted(step_id, fault.name,
                                                        queues=fault.queue_tallies()))
        rest = None if step_ids is None else [s for s in step_ids if s not in here]
        if self.proxy is not None and rest != []:
            try:
                for step_id in await self.proxy.revert(rest):
                    reverted.append(step_id)
                    self.bus.announce("faultlab", FaultReverted(step_id, self._faults.get(step_id),
                                                                by="proxy"))
            except FaultlabError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]
        return reverted

    async def close(self) -> None:
        """At teardown: stop what is scheduled, undo what is still applied; a failure to undo
        is recorded, not raised, and nothing fires any more."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await self.revert(None)
        except FaultlabError as exc:
            self.bus.announce("faultlab", FaultRevertFailed(str(exc)))
