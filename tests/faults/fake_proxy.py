"""The proxy's side of the app faults' tests: the proxy process's state around a mitmproxy server
that records what it is asked to send, instead of sending it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitmproxy import http, websocket
from mitmproxy.proxy import events as proxy_events
from mitmproxy.test import tflow
from wsproto.frame_protocol import Opcode

from faultlab.proxy.control import Apply, Arm, FaultOrder, Number, Reply, Request, Revert
from faultlab.proxy.state import ProxyState


@dataclass(frozen=True)
class Injected:
    """A message the proxy was asked to send into a flow."""

    flow: http.HTTPFlow
    to_client: bool
    content: bytes
    is_text: bool


class FakeServer:
    """What the faults call of mitmproxy's Proxyserver, recording instead of sending."""

    def __init__(self) -> None:
        self.injected: list[Injected] = []
        # When each message was injected (time.monotonic, the clock of asyncio's loop).
        self.injected_at: list[float] = []
        self.events: list[proxy_events.MessageInjected[Any]] = []
        # mitmproxy's handlers of live client connections, by client id: a test flow has none.
        self.connections: dict[str, Any] = {}

    def inject_websocket(self, flow: http.HTTPFlow, to_client: bool, message: bytes,
                         is_text: bool = True) -> None:
        self.injected.append(Injected(flow, to_client, message, is_text))
        self.injected_at.append(time.monotonic())

    def inject_event(self, event: proxy_events.MessageInjected[Any]) -> None:
        self.events.append(event)


@dataclass
class Proxy:
    """The proxy process's state around a FakeServer, and the requests and messages it gets."""

    state: ProxyState
    server: FakeServer
    events_path: Path

    def open_flow(self) -> http.HTTPFlow:
        """A live WebSocket flow on the next connection, numbered by the run as the capture saw
        its SYN and registered as the frame log does."""
        flow = tflow.twebsocketflow()
        k = len(self.state.flows) + 1
        flow.client_conn.peername = ("198.18.0.2", 40000 + k)
        assert self.ask(Number(k=k, client_port=40000 + k)).ok
        self.state.flows.append(flow)
        return flow

    def ask(self, body: Arm | Apply | Revert | Number) -> Reply:
        """The proxy's reply to one request line on its control channel."""
        line = Request(id=7, body=body).model_dump_json(by_alias=True).encode()
        reply = self.state.answer(line)
        assert reply.id == 7
        return reply

    def apply(self, step: str, fault: str, params: dict[str, Any] | None = None) -> Reply:
        return self.ask(Apply(order=FaultOrder(step=step, fault=fault, params=params or {})))

    def revert(self, steps: list[str] | None = None) -> Reply:
        return self.ask(Revert(steps=steps))

    def send(self, flow: http.HTTPFlow, content: bytes | dict[str, Any], from_client: bool,
             binary: bool = False, injected: bool = False) -> websocket.WebSocketMessage:
        """Offer a message to the proxy's hooks as the frame log does, its kind from the
        protocol's `describe`."""
        data = json.dumps(content).encode() if isinstance(content, dict) else content
        message = websocket.WebSocketMessage(Opcode.BINARY if binary else Opcode.TEXT,
                                             from_client, data, injected=injected)
        self.state.on_message(flow, message, self.state.protocol.describe(data).get("kind", ""))
        return message

    def events(self) -> list[dict[str, Any]]:
        """What the proxy wrote to its events file, without the wall-clock `ts`."""
        lines = self.events_path.read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "ts"} for line in lines]
