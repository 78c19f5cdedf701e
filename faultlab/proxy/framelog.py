"""The mitmproxy addon that logs every WebSocket message, in both directions, as an event.

The proxy's own message history is trimmed as it goes (mitmproxy keeps every message of a flow
otherwise), so memory stays flat over long runs.
"""

from __future__ import annotations

from mitmproxy import http

from faultlab.events import EventWriter
from faultlab.proxy.livewire import describe

KEEP_MESSAGES = 1


class FrameLog:
    def __init__(self, events: EventWriter) -> None:
        self.events = events

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        client, server = flow.client_conn.peername, flow.server_conn.peername
        self.events.emit("proxy.ws_start", flow=flow.id[:8], path=flow.request.path[:200],
                         client=f"{client[0]}:{client[1]}" if client else None,
                         server=f"{server[0]}:{server[1]}" if server else None)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        assert flow.websocket is not None
        message = flow.websocket.messages[-1]
        self.events.emit(
            "proxy.frame", flow=flow.id[:8], dir="client->server" if message.from_client
            else "server->client", opcode=message.type.name.lower(), bytes=len(message.content),
            **describe(message.content))
        del flow.websocket.messages[:-KEEP_MESSAGES]

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        assert ws is not None
        self.events.emit("proxy.ws_end", flow=flow.id[:8], code=ws.close_code,
                         reason=ws.close_reason, closed_by_client=ws.closed_by_client)
