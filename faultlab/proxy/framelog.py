"""The mitmproxy addon: every WebSocket message becomes an event, after the faults have seen it.

Frames (`proxy.frame`, faultlab.vocabulary.run.FrameLogged, as the emulator writes them) name their
connection by the flow (`conn`) and carry the run's connection number `k`
(faultlab.connections) once the run has told it; `proxy.ws_start` gives the flow's client port,
by which the run numbers them in any case; `proxy.upstream` gives the proxy's own socket toward
the server for each client connection, as soon as it is connected. The proxy's own message
history is trimmed as it goes (mitmproxy keeps every message of a flow otherwise), so memory
stays flat over long runs. A recording run's proxy writes its tape here too
(faultlab.cassette.tape); a connection's end is taped when mitmproxy ends its flow, after the
close handshake. The event writer redacts the client's credentials (the path's
`?key=`), which the proxy also remembers, so they are redacted wherever else they appear.
"""

from __future__ import annotations

import itertools
import time

from mitmproxy import http
from mitmproxy.proxy.server_hooks import ServerConnectionHookData
from mitmproxy.websocket import WebSocketMessage

from faultlab.cassette.tape import Closed, Message, TapeWriter
from faultlab.private import credentials, remember_secrets
from faultlab.proxy import internals
from faultlab.proxy.state import ProxyState
from faultlab.vocabulary.lab import ProxyWsEnd, ProxyWsStart
from faultlab.vocabulary.run import FrameLogged, ProxyUpstream

KEEP_MESSAGES = 1
# The code a side reports for a connection that ended without a close frame (RFC 6455 7.1.5).
ABNORMAL_CLOSURE = 1006


# How long a WebSocket's messages may wait for the run to number its connection.
NUMBER_WITHIN_S = 1.0


class FrameLog:
    def __init__(self, state: ProxyState, tape: TapeWriter | None = None) -> None:
        self.state = state
        self.events = state.events
        # The run's recording, if it records: what the server sent, as it came, before any
        # fault saw it; what of the client's reached the server (a message a fault dropped
        # did not, one it injected did). Connections are numbered as their WebSockets open.
        self.tape = tape
        self._taped: dict[str, int] = {}
        self._numbers = itertools.count(1)

    def server_connected(self, data: ServerConnectionHookData) -> None:
        # The server leg of the client's connection: packet faults on that connection hurt it
        # too (faultlab.faults.legs), so the run learns its ports as soon as it exists.
        client, own, server = data.client.peername, data.server.sockname, data.server.peername
        if client and own and server:
            self.events.announce(ProxyUpstream(int(client[1]), str(own[0]), int(own[1]),
                                               str(server[0]), int(server[1])))

    async def websocket_start(self, flow: http.HTTPFlow) -> None:
        # The key the client sent is redacted wherever this process writes it, path included.
        remember_secrets(credentials(flow.request.path, flow.request.headers))
        # Its messages wait (mitmproxy relays none before this hook returns) until the run has
        # numbered the connection, so that its frames, and the steps that pick a connection,
        # know it: at once on an idle machine, where the number comes before the upgrade.
        k = await self.state.number_told(flow, NUMBER_WITHIN_S)
        self.state.flows.append(flow)
        client, server = flow.client_conn.peername, flow.server_conn.peername
        if self.tape is not None:
            number = self._taped[flow.id] = next(self._numbers)
            self.tape.opened(time.time(), number, flow.request.path, flow.request.headers,
                             flow.response.headers.get("sec-websocket-protocol")
                             if flow.response else None)
        self.events.announce(ProxyWsStart(
            flow.id[:8], k, client_port=client[1] if client else None,
            path=flow.request.path[:200], client=f"{client[0]}:{client[1]}" if client else None,
            server=f"{server[0]}:{server[1]}" if server else None))

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        assert flow.websocket is not None
        message = flow.websocket.messages[-1]
        taping = self.tape is not None
        if taping and not message.from_client and not message.injected:
            self._tape(flow, message)
        about = self.state.protocol.describe(message.content)
        self.state.on_message(flow, message, about.get("kind", ""))
        extra = {"dropped": True} if message.dropped else {}
        if message.injected:
            extra["injected"] = True
        kind = str(about.pop("kind", ""))
        self.events.announce(FrameLogged(
            "proxy", "client" if message.from_client else "server", flow.id[:8], kind,
            len(message.content), self.state.number_of(flow),
            {"opcode": message.type.name.lower(), **about, **extra}))
        if taping and message.from_client and not message.dropped:
            self._tape(flow, message)
        del flow.websocket.messages[:-KEEP_MESSAGES]

    def _tape(self, flow: http.HTTPFlow, message: WebSocketMessage) -> None:
        number = self._taped.get(flow.id)
        if self.tape is not None and number is not None:
            self.tape.write(Message(time.time(), number,
                                    "client" if message.from_client else "server",
                                    message.text if message.is_text else message.content))

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        assert ws is not None
        internals.forget(flow)
        number = self._taped.pop(flow.id, None)
        if self.tape is not None and number is not None:
            framed = ws.close_code not in (None, ABNORMAL_CLOSURE)
            self.tape.write(Closed(time.time(), number, ws.close_code if framed else None,
                                   ws.close_reason or "" if framed else "",
                                   ("client" if ws.closed_by_client else "server") if framed
                                   else None))
        self.events.announce(ProxyWsEnd(flow.id[:8], self.state.number_of(flow), ws.close_code,
                                        ws.close_reason, ws.closed_by_client))
