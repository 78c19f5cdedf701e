"""What app-level faults share: they act inside the proxy process, on WebSocket messages.

The runner's side of every app-level fault is the same: it asks the proxy to engage or disengage
the fault, by step id, name and parameters. In the proxy process the fault's own hooks then see
each message (`on_message`) and each control frame (`on_control`) of the flows it chose.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer
from faultlab.faults.flows import ConnectionChoice, Direction

if TYPE_CHECKING:
    from mitmproxy import http, websocket
    from wsproto.events import Event as WsEvent

    from faultlab.proxy.state import ProxyState

def heading(direction: Direction, from_client: bool) -> bool:
    """Whether a message from the client (or the server) goes the fault's `direction`."""
    return direction == "both" or (direction == "to_server") == from_client


class AppParams(FaultParams):
    """`connection`: which WebSocket flow, in the order the proxy saw them (`first`, `latest`,
    k); all flows live when the fault is applied when absent (connections made later, such as a
    client's resume, are not hurt)."""

    connection: ConnectionChoice | None = Field(default=None)


class AppFault[P: AppParams](Fault[P]):
    """A fault the proxy applies; the runner only relays."""

    layer: ClassVar[Layer] = "app"

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        if ctx.proxy is None:
            raise MechanismError(f"{self.name} needs the proxy, which this run has not started")
        return await ctx.proxy.request("apply", self.step_id, self.name,
                                       self.params.model_dump(mode="json", by_alias=True))

    async def revert(self, ctx: FaultContext) -> None:
        if ctx.proxy is not None and self.reversible:
            await ctx.proxy.request("revert", self.step_id, self.name, {})

    # In the proxy process.

    @abstractmethod
    def engage(self, proxy: ProxyState) -> dict[str, Any]:
        """Start hurting; returns the details of the `fault.applied` event."""

    def disengage(self, proxy: ProxyState) -> None:
        """Stop hurting (what `revert` and `restore` do)."""

    def on_message(self, proxy: ProxyState, flow: http.HTTPFlow,
                   message: websocket.WebSocketMessage, kind: str) -> None:
        """A data message (of Live API `kind`, or "") the proxy is about to relay;
        `message.drop()` keeps it from its peer."""

    def on_control(self, flow: http.HTTPFlow, to_client: bool, event: WsEvent) -> bool:
        """Whether a ping or pong may pass."""
        return True

    def holds_events(self, flow: http.HTTPFlow, from_client: bool) -> bool:
        """Whether everything arriving from that side (bytes, its close, its FIN) is held back
        whole, unseen even by the message hooks."""
        return False

    chosen: list[http.HTTPFlow]

    def hits(self, proxy: ProxyState, flow: http.HTTPFlow) -> bool:
        """Whether `flow` is one this fault chose when it was applied."""
        return flow in self.chosen
