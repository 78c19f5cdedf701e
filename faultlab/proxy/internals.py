"""The few mitmproxy internals the app-level faults need, in one place (upgrades may break them).

mitmproxy 12 has no API to abort a live WebSocket (`flow.kill()` does nothing to one), to close
one with a chosen code, or to see pings and pongs (its WebSocket layer relays control frames
without a hook). So this module:

- patches `WebsocketLayer.relay_messages` once, to register each live layer by flow id, to put
  a filter in front of the control frames it relays, to hold back whole events (bytes or a
  connection's end) from one side while a hold says so, replaying them on `WakeInjected`, and to
  understand `CloseInjected`: a close frame with a chosen code sent to one or both ends through
  the layer's own wsproto (so it is encrypted like any frame on a TLS leg);
- aborts a leg by its transport, with SO_LINGER (1, 0), so the peer gets a RST;
- closes a connection's socket as soon as the layer asks for its close
  (`ConnectionHandler.close_connection`). mitmproxy closes it when its reading task ends, by
  cancelling that task; a cancel that lands while the task waits for `server_event`'s lock
  ends the task before it closes the socket, and the peer is never told (seen: with the
  `close` fault, the server's leg stayed open until the proxy stopped in 3 runs of 8 on a
  busy machine, whenever a server frame came in as the client's answering close did).

One more patch is not here because it must come before this module is imported: the proxy
process's entry (`faultlab.proxy.__main__`, `bare_addons_package`) makes `mitmproxy.addons` a
package that imports no addon of itself.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import wsproto.events
from mitmproxy import connection as mitm_connection
from mitmproxy import http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.layers import websocket as ws_layer
from mitmproxy.proxy.server import ConnectionHandler
from wsproto.connection import ConnectionState

# Whether a control frame (Ping/Pong) going to the client (True) or server may pass.
ControlFilter = Callable[[http.HTTPFlow, bool, wsproto.events.Event], bool]
# Whether what arrives from the client (True) or the server must be held back whole.
Hold = Callable[[http.HTTPFlow, bool], bool]

_layers: dict[str, ws_layer.WebsocketLayer] = {}
_filter: list[ControlFilter] = []
_hold: list[Hold] = []
_held: dict[str, list[events.Event]] = {}
_discarding: set[str] = set()


@dataclass
class WakeInjected(ws_layer.WebSocketMessageInjected):
    """Replay what a hold kept back from a flow (its data messages dropped with `discard`)."""

    discard: bool = False


@dataclass
class CloseInjected(ws_layer.WebSocketMessageInjected):
    """Ask a flow's WebSocket layer to send a close frame to the client and/or the server."""

    code: int = 1000
    reason: str = ""
    to_client: bool = True
    to_server: bool = True


def _wrap_send(layer: ws_layer.WebsocketLayer, conn: ws_layer.WebsocketConnection,
               to_client: bool) -> None:
    original = conn.send2

    def send2(event: wsproto.events.Event) -> commands.SendData:
        if isinstance(event, wsproto.events.Ping | wsproto.events.Pong) and not all(
                allow(layer.flow, to_client, event) for allow in _filter):
            return commands.SendData(conn.conn, b"")
        return original(event)

    conn.send2 = send2  # type: ignore[method-assign]


def install(control_filter: ControlFilter, hold: Hold) -> None:
    """Patch the WebSocket layer (once); route control frames through `control_filter` and every
    incoming event through `hold`."""
    _filter[:] = [control_filter]
    _hold[:] = [hold]
    if getattr(ws_layer.WebsocketLayer, "_faultlab_patched", False):
        return
    _close_sockets_on_command()
    original = ws_layer.WebsocketLayer.relay_messages

    def relay_messages(self: ws_layer.WebsocketLayer, event: Any) -> Generator[Any, Any, None]:
        if self.flow.id not in _layers:
            _layers[self.flow.id] = self
            _wrap_send(self, self.client_ws, True)
            _wrap_send(self, self.server_ws, False)
        if isinstance(event, CloseInjected):
            close = wsproto.events.CloseConnection(event.code, event.reason)
            for conn, wanted in ((self.client_ws, event.to_client), (self.server_ws, event.to_server)):
                if wanted and conn.state in (ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING):
                    yield conn.send2(close)
            return
        if isinstance(event, WakeInjected):
            if event.discard:
                _discarding.add(self.flow.id)
            try:
                for held in _held.pop(self.flow.id, []):
                    yield from relay_messages(self, held)
            finally:
                _discarding.discard(self.flow.id)
            return
        if isinstance(event, events.DataReceived | events.ConnectionClosed):
            from_client = event.connection == self.context.client
            if any(hold(self.flow, from_client) for hold in _hold):
                _held.setdefault(self.flow.id, []).append(event)
                return
        yield from original(self, event)

    ws_layer.WebsocketLayer.relay_messages = relay_messages  # type: ignore[method-assign]
    ws_layer.WebsocketLayer._faultlab_patched = True  # type: ignore[attr-defined]


def _close_sockets_on_command() -> None:
    original = ConnectionHandler.close_connection

    def close_connection(self: ConnectionHandler, connection: mitm_connection.Connection,
                         half_close: bool = False) -> None:
        original(self, connection, half_close)
        io = self.transports.get(connection)
        writer = io.writer if io is not None else None
        # Data the layer sent before the close is flushed first; SendData skips a closing writer.
        if isinstance(writer, asyncio.StreamWriter) and not writer.is_closing() and (
                connection.state is mitm_connection.ConnectionState.CLOSED):
            writer.close()

    ConnectionHandler.close_connection = close_connection  # type: ignore[method-assign]


def forget(flow: http.HTTPFlow) -> None:
    _layers.pop(flow.id, None)
    _held.pop(flow.id, None)


def discarding(flow: http.HTTPFlow) -> bool:
    """Whether the data messages of `flow` being replayed now are to be dropped."""
    return flow.id in _discarding


def wake(server: Proxyserver, flow: http.HTTPFlow, discard: bool) -> None:
    """Replay, in order, what holds kept back from `flow`."""
    from mitmproxy import websocket

    message = websocket.WebSocketMessage(1, False, b"")  # carries the flow; never relayed
    server.inject_event(WakeInjected(flow, message, discard))


def inject_close(server: Proxyserver, flow: http.HTTPFlow, code: int, reason: str,
                 to_client: bool, to_server: bool) -> None:
    from mitmproxy import websocket

    message = websocket.WebSocketMessage(1, False, b"")  # carries the flow; never relayed
    server.inject_event(CloseInjected(flow, message, code, reason, to_client, to_server))


def abort(server: Proxyserver, flow: http.HTTPFlow, client: bool, server_leg: bool) -> list[str]:
    """Reset the flow's client and/or server TCP connection; returns the legs reset."""
    handler = server.connections.get(flow.client_conn.id)
    if handler is None:
        return []
    done = []
    for leg, conn, wanted in (("client", flow.client_conn, client),
                              ("server", flow.server_conn, server_leg)):
        io = handler.transports.get(conn)
        if not wanted or io is None or not isinstance(io.writer, asyncio.StreamWriter):
            continue
        sock = io.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        io.writer.transport.abort()
        done.append(leg)
    return done
