"""inject: the proxy sends a message of its own to the client or the server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from faultlab.faults.app import AppFault, WebSocketParams
from faultlab.faults.base import register

if TYPE_CHECKING:
    from faultlab.faults.app import ProxyView


class InjectParams(WebSocketParams):
    """`to`: client (as if from the server) or server (as if from the client); `message`: text,
    or a mapping sent as JSON."""

    to: Literal["client", "server"]
    """Where the message goes: to the `client` (as if from the server) or the `server` (as if from
    the client)."""
    message: str | dict[str, Any]
    """The message, sent as one text frame: a string as it is, or a mapping as JSON."""


@register
class Inject(AppFault[InjectParams]):
    """Send one text message into the chosen flows."""

    name: ClassVar[str] = "inject"
    Params = InjectParams
    reversible: ClassVar[bool] = False

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        p = self.params
        text = p.message if isinstance(p.message, str) else json.dumps(p.message)
        flows = self.chosen
        for flow in flows:
            proxy.server.inject_websocket(flow, p.to == "client", text.encode(), True)
        return {"to": p.to, "flows": len(flows), "bytes": len(text.encode())}
