"""freeze: the proxy stops relaying, while both TCP connections stay up and ACKed.

`network` holds everything that arrives, bytes, pings, close frames and FINs alike: to both ends
the path looks dead, and the server keeps the connection (as behind a frozen proxy in the field).
`stall` holds data messages only and lets control frames through: the peer looks hung, not gone.
What was held is delivered in order when the freeze is reverted (`restore`) or by `thaw`, which
can also discard the data messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from faultlab.faults.app import AppFault, WebSocketParams, heading
from faultlab.faults.base import register
from faultlab.faults.flows import Direction

if TYPE_CHECKING:
    import wsproto.events
    from mitmproxy import http, websocket

    from faultlab.faults.app import ProxyView


class FreezeParams(WebSocketParams):
    """`mode`: network or stall; `direction`: which way is frozen."""

    mode: Literal["network", "stall"] = "network"
    """`network`: hold everything that arrives (bytes, pings, close frames, FINs), so the path looks
    dead; `stall`: hold data messages only and let pings and pongs pass, so the peer looks hung."""
    direction: Direction = "both"
    """Which way is frozen: `both`, `to_server` or `to_client`."""


@register
class Freeze(AppFault[FreezeParams]):
    """Hold what goes the chosen way: data messages (stall), or everything that arrives (network)."""

    name: ClassVar[str] = "freeze"
    Params = FreezeParams

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        self.held: list[tuple[http.HTTPFlow, bool, bytes, bool]] = []
        self.discard = False
        return {"mode": self.params.mode, "direction": self.params.direction}

    def on_message(self, proxy: ProxyView, flow: http.HTTPFlow,
                   message: websocket.WebSocketMessage, kind: str) -> None:
        if heading(self.params.direction, message.from_client):
            message.drop()  # type: ignore[no-untyped-call]
            self.held.append((flow, message.from_client, message.content, message.is_text))

    def on_control(self, flow: http.HTTPFlow, to_client: bool, event: wsproto.events.Event) -> bool:
        # Control frames already parsed when the freeze began (same TCP read) are lost, not held.
        return self.params.mode == "stall" or not heading(self.params.direction, not to_client)

    def holds_events(self, flow: http.HTTPFlow, from_client: bool) -> bool:
        return self.params.mode == "network" and heading(self.params.direction, from_client)

    def disengage(self, proxy: ProxyView) -> None:
        from faultlab.proxy import internals

        held, self.held = self.held, []
        if not self.discard:
            for flow, from_client, content, is_text in held:
                if flow.live:
                    proxy.server.inject_websocket(flow, not from_client, content, is_text)
        if self.params.mode == "network":
            for flow in self.chosen:
                internals.wake(proxy.server, flow, self.discard)
