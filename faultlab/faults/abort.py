"""abort: the proxy resets the TCP connections of a WebSocket, with no close frame.

mitmproxy turns one leg's reset into a clean close 1000 on the other leg, which would hide the
fault: by default both legs are reset at once, so each end sees an abnormal closure (1006).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from faultlab.faults.app import AppFault, WebSocketParams
from faultlab.faults.base import register

if TYPE_CHECKING:
    from faultlab.faults.app import ProxyView


class AbortParams(WebSocketParams):
    """`legs`: both (default), client or server: which TCP connections get the RST."""

    legs: Literal["both", "client", "server"] = "both"
    """Which TCP connections get the RST: `both` (each end sees an abnormal closure, 1006), `client`
    or `server` (mitmproxy then closes the other end cleanly, 1000)."""


@register
class Abort(AppFault[AbortParams]):
    """Reset the chosen legs of the chosen flows at once."""

    name: ClassVar[str] = "abort"
    Params = AbortParams
    reversible: ClassVar[bool] = False

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        from faultlab.proxy import internals

        legs = self.params.legs
        reset = []
        for flow in self.chosen:
            reset += internals.abort(proxy.server, flow, legs in ("both", "client"),
                                     legs in ("both", "server"))
        return {"legs": legs, "reset": reset}
