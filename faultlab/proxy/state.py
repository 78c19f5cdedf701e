"""The proxy process's state: the client's connections, the faults engaged, the armed steps.

The proxy owns every app-level fault of a run: the control channel engages and disengages them
on the run's behalf, and steps armed at the start fire inside the message hook, before or after
the matching message is relayed, so "freeze on toolCall" holds the toolCall itself back.
Connections carry the run's numbers (faultlab.connections), which the run sends as the capture
sees each SYN, keyed by the client's port.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mitmproxy import http, websocket
from mitmproxy.addons.proxyserver import Proxyserver
from pydantic import ValidationError
from wsproto.events import Event as WsEvent

from faultlab.connections import ConnectionChoice, choose
from faultlab.events import EventWriter
from faultlab.faults.app import AppFault, WebSocketParams
from faultlab.frames import Frame, FrameWatch
from faultlab.protocols import DEFAULT
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.proxy import internals
from faultlab.proxy.control import Apply, Arm, ArmedStep, FaultOrder, Number, Reply, Request, Revert
from faultlab.vocabulary.run import FaultApplied, FaultFailed


@dataclass
class Armed:
    """An armed step and the watch that counts its matching messages."""

    step: ArmedStep
    watch: FrameWatch
    fired: bool = False


@dataclass
class ProxyState:
    server: Proxyserver
    events: EventWriter
    # The run's number of each client connection, by the client's port.
    numbers: dict[int, int] = field(default_factory=dict)
    flows: list[http.HTTPFlow] = field(default_factory=list)
    active: dict[str, AppFault[Any]] = field(default_factory=dict)
    armed: list[Armed] = field(default_factory=list)
    # The run's protocol: it names the messages, and steps and faults match them by it.
    protocol: RealtimeApi = DEFAULT

    # Whether the run numbers the connections (a run's capture does; a bench has none), and the
    # numbers a WebSocket that opened before it was told its own waits for, by client port.
    numbered: bool = False
    told: dict[int, asyncio.Future[int]] = field(default_factory=dict)

    def number_of(self, flow: http.HTTPFlow) -> int:
        """The run's number of the flow's connection; 0 while the run has not told it."""
        peer = flow.client_conn.peername
        return self.numbers.get(int(peer[1]), 0) if peer else 0

    async def number_told(self, flow: http.HTTPFlow, within_s: float) -> int:
        """The flow's number, once the run has told it (0 if it has not within `within_s`, or
        if the run numbers no connections).
        The run tells it as the capture's SYN reaches it through tcpdump's pipe: on a loaded
        machine (three lab tests on two cores) that once came 29 ms after the SYN, after the
        TLS handshake and the upgrade, and the first frames were logged with no number."""
        peer, k = flow.client_conn.peername, self.number_of(flow)
        if k or peer is None or not self.numbered:
            return k
        port = int(peer[1])
        told = self.told.setdefault(port, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(asyncio.shield(told), within_s)
        except TimeoutError:
            return 0
        finally:
            self.told.pop(port, None)

    def select(self, which: ConnectionChoice | None) -> list[http.HTTPFlow]:
        """Live WebSocket flows: all, or that of connection `first`, `latest` or k (none such
        fails, as a packet fault on an unseen connection does)."""
        if which is None:
            return [f for f in self.flows if f.live]
        numbered = sorted((f for f in self.flows if self.number_of(f)), key=self.number_of)
        if isinstance(which, int):
            numbered = [f for f in numbered if self.number_of(f) == which]
            which = "first"
        flow = choose(numbered, which)
        if flow is None or not flow.live:
            raise ValueError(f"no live WebSocket on connection {which!r}")
        return [flow]

    def engage(self, order: FaultOrder) -> dict[str, Any]:
        return self._engage(order)[1]

    def _engage(self, order: FaultOrder) -> tuple[AppFault[Any], dict[str, Any]]:
        fault = order.build()
        if not isinstance(fault, AppFault):
            raise ValueError(f"{order.fault} is not a fault the proxy applies")
        params = fault.params
        fault.chosen = self.select(params.connection if isinstance(params, WebSocketParams)
                                   else None)
        details = fault.engage(self)
        if fault.reversible:
            self.active[order.step] = fault
        return fault, details

    def disengage(self, step: str) -> None:
        fault = self.active.pop(step, None)
        if fault is not None:
            fault.disengage(self)

    def revert(self, steps: list[str] | None) -> list[str]:
        """Disengage these steps' faults, the latest first (all when None); the ids reverted."""
        ids = [s for s in reversed(self.active) if steps is None or s in steps]
        for step in ids:
            self.disengage(step)
        return ids

    def on_message(self, flow: http.HTTPFlow, message: websocket.WebSocketMessage,
                   kind: str) -> None:
        if internals.discarding(flow):
            message.drop()
            return
        frame = Frame("client" if message.from_client else "server", self.number_of(flow), kind,
                      message.content, self.protocol)
        for armed in self.armed:
            if not armed.fired and armed.watch.offer(frame):
                armed.fired = True
                self._fire(armed.step, kind)
        for fault in list(self.active.values()):
            if message.dropped:
                return  # a fault took it (dropped, held or delayed): the others never see it
            if fault.hits(flow):
                fault.on_message(self, flow, message, kind)

    def _fire(self, step: ArmedStep, kind: str) -> None:
        def fire() -> None:
            started = time.perf_counter()
            try:
                fault, details = self._engage(step)
            except Exception as exc:  # reported to the run, which ends as a lab failure
                self.events.announce(FaultFailed(step.step, step.fault, repr(exc)))
                return
            self.events.announce(FaultApplied.of(
                fault, f"on frame {kind}", (time.perf_counter() - started) * 1000, details))

        if step.match.forward == "before" and step.after_s == 0:
            fire()
        else:
            # After the message is relayed (the hook returns first), or `after` later.
            asyncio.get_running_loop().call_later(step.after_s, fire)

    def holds(self, flow: http.HTTPFlow, from_client: bool) -> bool:
        return any(f.holds_events(flow, from_client) for f in self.active.values() if f.hits(flow))

    def allow_control(self, flow: http.HTTPFlow, to_client: bool, event: WsEvent) -> bool:
        return all(f.on_control(flow, to_client, event)
                   for f in self.active.values() if f.hits(flow))

    async def serve_control(self, path: Path) -> asyncio.Server:
        return await asyncio.start_unix_server(self._client, str(path))

    def answer(self, line: bytes) -> Reply:
        """The reply to one request line; a bad request or a failed fault is a refusal."""
        try:
            request = Request.model_validate_json(line)
        except ValidationError as exc:
            return Reply(ok=False, error=f"bad request: {exc}")
        body = request.body
        try:
            if isinstance(body, Number):
                self.numbers[body.client_port] = body.k
                if (told := self.told.get(body.client_port)) is not None and not told.done():
                    told.set_result(body.k)
                return Reply(id=request.id)
            if isinstance(body, Arm):
                for step in body.steps:
                    step.build()  # the parameters are valid, or the arming fails now
                self.armed += [Armed(step, FrameWatch(step.match)) for step in body.steps]
                return Reply(id=request.id)
            if isinstance(body, Apply):
                return Reply(id=request.id, details=self.engage(body.order))
            assert isinstance(body, Revert)
            return Reply(id=request.id, reverted=self.revert(body.steps))
        except Exception as exc:
            return Reply(id=request.id, ok=False, error=repr(exc))

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write((self.answer(line).model_dump_json(by_alias=True) + "\n").encode())
            await writer.drain()


def install(state: ProxyState) -> None:
    internals.install(state.allow_control, state.holds)
