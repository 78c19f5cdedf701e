"""delay: the proxy holds each message for a while before relaying it, keeping their order."""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any, ClassVar

from faultlab.faults.app import AppFault, WebSocketParams, heading
from faultlab.faults.base import register
from faultlab.faults.flows import Direction
from faultlab.model import Duration

if TYPE_CHECKING:
    from mitmproxy import http, websocket

    from faultlab.faults.app import ProxyView


ORDER_GAP_S = 1e-6


class DelayParams(WebSocketParams):
    """`delay` per message, plus up to `jitter` at random; `direction`. Control frames are not
    delayed."""

    direction: Direction = "both"
    """Which way's data messages are delayed: `both`, `to_server` or `to_client`."""
    delay: Duration
    """How late each data message is relayed, a duration (`500ms`); control frames are not
    delayed."""
    jitter: Duration = 0.0
    """Up to this much more delay, drawn uniformly at random for each message, a duration; messages
    still keep their order."""


@register
class Delay(AppFault[DelayParams]):
    """Relay every data message going the chosen way `delay` (+ jitter) late, in order."""

    name: ClassVar[str] = "delay"
    Params = DelayParams

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        self._release: dict[tuple[str, bool], float] = {}
        return {"direction": self.params.direction, "delay_s": self.params.delay,
                "jitter_s": self.params.jitter}

    def on_message(self, proxy: ProxyView, flow: http.HTTPFlow,
                   message: websocket.WebSocketMessage, kind: str) -> None:
        p = self.params
        if message.injected or not heading(p.direction, message.from_client):
            return
        loop = asyncio.get_running_loop()
        key = (flow.id, message.from_client)
        # After the previous message of the same way, strictly (TCP does not reorder, and the
        # loop's timer heap does not keep equal times in order).
        at = max(self._release.get(key, 0.0) + ORDER_GAP_S,
                 loop.time() + p.delay + random.uniform(0, p.jitter))
        self._release[key] = at
        message.drop()  # type: ignore[no-untyped-call]
        loop.call_at(at, proxy.server.inject_websocket, flow, not message.from_client,
                     message.content, message.is_text)
