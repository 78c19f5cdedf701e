"""drop_message: the proxy swallows WebSocket messages; TCP and every other frame carry on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from faultlab.faults.app import AppFault, WebSocketParams, heading
from faultlab.faults.base import register
from faultlab.faults.flows import Direction

if TYPE_CHECKING:
    from mitmproxy import http, websocket

    from faultlab.faults.app import ProxyView


class DropMessageParams(WebSocketParams):
    """`direction`; `kind`: only messages of this kind in the run's protocol (e.g. toolCall); `count`: only
    the next N matching messages (all while applied when absent)."""

    direction: Direction = "both"
    """Which way's data messages are dropped: `both`, `to_server` or `to_client`."""
    kind: str | None = None
    """Only messages of this kind in the run's protocol (`toolCall`); absent: every data message."""
    count: int | None = Field(default=None, ge=1)
    """Only the next N matching messages, then the rest pass; absent: every one while the fault is
    applied."""


@register
class DropMessage(AppFault[DropMessageParams]):
    """Drop data messages going the chosen way until reverted (or `count` are gone)."""

    name: ClassVar[str] = "drop_message"
    Params = DropMessageParams

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        self.dropped = 0
        return {"direction": self.params.direction, "kind": self.params.kind}

    def on_message(self, proxy: ProxyView, flow: http.HTTPFlow,
                   message: websocket.WebSocketMessage, kind: str) -> None:
        p = self.params
        if not heading(p.direction, message.from_client) or (
                p.count is not None and self.dropped >= p.count):
            return
        if p.kind and not proxy.protocol.kind_matches(kind, p.kind):
            return
        message.drop()  # type: ignore[no-untyped-call]
        self.dropped += 1
