"""The proxy process's state: the live WebSocket flows, the faults engaged, the armed triggers.

The control channel (a unix socket) engages and disengages faults on the runner's behalf; content
triggers armed at the start fire inside the message hook, before or after the matching message is
relayed, so "freeze on toolCall" holds the toolCall itself back.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mitmproxy import http, websocket
from mitmproxy.addons.proxyserver import Proxyserver
from wsproto.events import Event as WsEvent

from faultlab.emulator.wire import snake_keys
from faultlab.events import EventWriter
from faultlab.faults import FAULTS
from faultlab.faults.app import AppFault
from faultlab.kinds import kind_matches
from faultlab.proxy import internals


def value_at(data: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return None
    return data


@dataclass
class Armed:
    """A step whose trigger is a frame: it fires inside the proxy."""

    step: str
    fault: str
    params: dict[str, Any]
    match: dict[str, Any]
    after_s: float
    seen: int = 0
    fired: bool = False

    def matches(self, flow_k: int, from_client: bool, content: bytes, kind: str) -> bool:
        m = self.match
        side = m.get("from", "either")
        if side != "either" and (side == "client") != from_client:
            return False
        if m.get("connection") is not None and m["connection"] != flow_k:
            return False
        if m.get("kind") and not kind_matches(kind, m["kind"]):
            return False
        if m.get("equals") or m.get("regex"):
            try:
                data = snake_keys(json.loads(content))
            except (ValueError, UnicodeDecodeError):
                return False
            for path, value in (m.get("equals") or {}).items():
                if value_at(data, path) != value:
                    return False
            for path, pattern in (m.get("regex") or {}).items():
                if not re.search(pattern, str(value_at(data, path))):
                    return False
        self.seen += 1
        return bool(self.seen == m.get("nth", 1))


@dataclass
class ProxyState:
    server: Proxyserver
    events: EventWriter
    flows: list[http.HTTPFlow] = field(default_factory=list)
    active: dict[str, AppFault[Any]] = field(default_factory=dict)
    armed: list[Armed] = field(default_factory=list)

    def select(self, which: str | int | None) -> list[http.HTTPFlow]:
        """Live WebSocket flows: all, or `first`, `latest`, k (1-based, in the order seen)."""
        if which is None:
            return [f for f in self.flows if f.live]
        if which == "first":
            chosen = self.flows[:1]
        elif which == "latest":
            chosen = self.flows[-1:]
        else:
            chosen = self.flows[int(which) - 1 : int(which)] if int(which) >= 1 else []
        return [f for f in chosen if f.live]

    def number_of(self, flow: http.HTTPFlow) -> int:
        return self.flows.index(flow) + 1 if flow in self.flows else 0

    # Faults.

    def engage(self, step: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
        cls = FAULTS[name]
        fault = cls(step, cls.Params.model_validate(params))
        if not isinstance(fault, AppFault):
            raise ValueError(f"{name} is not an app-level fault")
        fault.chosen = self.select(fault.params.connection)
        details = fault.engage(self)
        if fault.reversible:
            self.active[step] = fault
        return details

    def disengage(self, step: str) -> None:
        fault = self.active.pop(step, None)
        if fault is not None:
            fault.disengage(self)

    # Hooks.

    def on_message(self, flow: http.HTTPFlow, message: websocket.WebSocketMessage,
                   kind: str) -> None:
        if internals.discarding(flow):
            message.drop()
            return
        k = self.number_of(flow)
        for armed in self.armed:
            if not armed.fired and armed.matches(k, message.from_client, message.content, kind):
                armed.fired = True
                self._fire(armed, kind)
        for fault in list(self.active.values()):
            if fault.hits(self, flow):
                fault.on_message(self, flow, message, kind)

    def _fire(self, armed: Armed, kind: str) -> None:
        trigger = f"on frame {kind}"
        before = armed.match.get("forward", "after") == "before"

        def fire() -> None:
            started = time.perf_counter()
            try:
                details = self.engage(armed.step, armed.fault, armed.params)
            except Exception as exc:  # reported to the run, which ends as a lab failure
                self.events.emit("fault.failed", step=armed.step, fault=armed.fault,
                                 error=repr(exc))
                return
            self.events.emit("fault.applied", step=armed.step, fault=armed.fault, layer="app",
                             trigger=trigger,
                             applied_in_ms=round((time.perf_counter() - started) * 1000, 3),
                             **details)

        if before and armed.after_s == 0:
            fire()
        else:
            # After the message is relayed (the hook returns first), or `after` later.
            asyncio.get_running_loop().call_later(armed.after_s, fire)

    def holds(self, flow: http.HTTPFlow, from_client: bool) -> bool:
        return any(f.holds_events(flow, from_client)
                   for f in self.active.values() if f.hits(self, flow))

    def allow_control(self, flow: http.HTTPFlow, to_client: bool, event: WsEvent) -> bool:
        return all(f.on_control(flow, to_client, event)
                   for f in self.active.values() if f.hits(self, flow))

    # The control channel.

    async def serve_control(self, path: Path) -> asyncio.Server:
        return await asyncio.start_unix_server(self._client, str(path))

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            request = json.loads(line)
            reply: dict[str, Any] = {"id": request.get("id"), "ok": True}
            try:
                op = request["op"]
                if op == "apply":
                    reply["details"] = self.engage(request["step"], request["fault"],
                                                   request["params"])
                elif op == "revert":
                    self.disengage(request["step"])
                elif op == "arm":
                    self.armed += [Armed(**a) for a in request["steps"]]
                else:
                    raise ValueError(f"unknown operation {op!r}")
            except Exception as exc:
                reply = {"id": request.get("id"), "ok": False, "error": repr(exc)}
            writer.write((json.dumps(reply) + "\n").encode())
            await writer.drain()


def install(state: ProxyState) -> None:
    internals.install(state.allow_control, state.holds)
