"""drop_control: pings or pongs vanish; data keeps flowing (a keepalive that times out)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import wsproto.events

from faultlab.faults.app import AppFault, WebSocketParams
from faultlab.faults.base import register
from faultlab.faults.flows import Direction

if TYPE_CHECKING:
    from mitmproxy import http

    from faultlab.faults.app import ProxyView


class DropControlParams(WebSocketParams):
    """`frames`: pings, pongs or both; `direction`: which way they travel."""

    frames: Literal["pings", "pongs", "both"] = "pongs"
    """Which control frames vanish: `pings`, `pongs` or `both`."""
    direction: Direction = "both"
    """Which way the frames that vanish travel: `both`, `to_server` or `to_client`."""


@register
class DropControl(AppFault[DropControlParams]):
    """Swallow the chosen control frames until reverted."""

    name: ClassVar[str] = "drop_control"
    Params = DropControlParams

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        return {"frames": self.params.frames, "direction": self.params.direction}

    def on_control(self, flow: http.HTTPFlow, to_client: bool, event: wsproto.events.Event) -> bool:
        p = self.params
        if p.direction != "both" and (p.direction == "to_client") != to_client:
            return True
        if isinstance(event, wsproto.events.Ping):
            return p.frames == "pongs"
        return p.frames == "pings"
