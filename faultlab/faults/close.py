"""close: the proxy sends a WebSocket close frame with a chosen code and reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from faultlab.faults.app import AppFault, WebSocketParams
from faultlab.faults.base import register

if TYPE_CHECKING:
    from faultlab.faults.app import ProxyView


class CloseParams(WebSocketParams):
    """`code` (1000-4999), `reason` (at most 123 bytes), `to`: client, server or both. The end
    that gets it answers with its own close, which the proxy relays to the other end."""

    code: int = Field(default=1000, ge=1000, le=4999)
    """The close code: 1000-1003, 1007-1014 or 3000-4999 (the others cannot go on the wire, or are
    unassigned)."""
    reason: str = ""
    """The close reason, at most 123 bytes in UTF-8."""
    to: Literal["client", "server", "both"] = "both"
    """Which end gets the close frame: `client`, `server` or `both`; its answering close is relayed
    to the other end."""

    @field_validator("code")
    @classmethod
    def _sendable(cls, code: int) -> int:
        # RFC 6455 7.4: 1005, 1006 and 1015 never go on the wire (wsproto sends 1000 instead);
        # 1004 and the rest below 3000 are unassigned, and a peer fails the connection (1002).
        if not (1000 <= code <= 1003 or 1007 <= code <= 1014 or code >= 3000):
            raise ValueError(f"{code} cannot be sent in a close frame: use 1000-1003, "
                             "1007-1014 or 3000-4999")
        return code

    @field_validator("reason")
    @classmethod
    def _short(cls, reason: str) -> str:
        if len(reason.encode()) > 123:
            raise ValueError("a close reason is at most 123 bytes")
        return reason


@register
class Close(AppFault[CloseParams]):
    """Close the chosen flows with a close frame of this code."""

    name: ClassVar[str] = "close"
    Params = CloseParams
    reversible: ClassVar[bool] = False

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        from faultlab.proxy import internals

        p = self.params
        flows = self.chosen
        for flow in flows:
            internals.inject_close(proxy.server, flow, p.code, p.reason,
                                   p.to in ("client", "both"), p.to in ("server", "both"))
        return {"code": p.code, "reason": p.reason, "to": p.to, "flows": len(flows)}
