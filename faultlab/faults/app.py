"""What app-level faults share: they live in the proxy process and act on WebSocket messages.

The run's side of every app-level fault is the same: it asks the proxy to engage one (by step id,
name and parameters, typed messages over the control channel) and records the answer; the proxy
owns the fault from then on and reverts it when asked. In the proxy process the fault's hooks
see each message (`on_message`) and each control frame (`on_control`) of the flows it chose.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import Field

from faultlab.connections import ConnectionChoice
from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, Need
from faultlab.faults.flows import Direction

if TYPE_CHECKING:
    from mitmproxy import http, websocket
    from mitmproxy.addons.proxyserver import Proxyserver
    from wsproto.events import Event as WsEvent

    from faultlab.events import EventWriter
    from faultlab.protocols import Protocol as RealtimeApi


def heading(direction: Direction, from_client: bool) -> bool:
    """Whether a message from the client (or the server) goes the fault's `direction`."""
    return direction == "both" or (direction == "to_server") == from_client


class ProxyView(Protocol):
    """What an app-level fault sees of the proxy process."""

    @property
    def server(self) -> Proxyserver: ...
    @property
    def events(self) -> EventWriter: ...
    @property
    def active(self) -> Mapping[str, AppFault[Any]]:
        """The engaged faults, by step id."""

    @property
    def protocol(self) -> RealtimeApi:
        """The run's protocol, which names the messages."""

    def disengage(self, step: str) -> None: ...


class AppParams(FaultParams):
    """The parameters of a fault the proxy applies. thaw's derive from these alone: it ends
    freezes by their steps, whatever connections they chose; the others' from WebSocketParams."""


class WebSocketParams(AppParams):
    """`connection`: which connection's WebSocket (`first`, `latest`, k; see
    faultlab.connections); all flows live when the fault is applied when absent (connections made
    later, such as a client's resume, are not hurt)."""

    connection: ConnectionChoice | None = Field(default=None)
    """One connection's WebSocket: `first`, `latest` or `k` (the k-th seen, from 1), live when
    the step fires; absent: every WebSocket live then (later ones, a resume say, are not hurt)."""


class AppFault[P: AppParams](Fault[P]):
    """A fault the proxy applies, holds and reverts; the run only asks."""

    layer: ClassVar[Layer] = "app"
    mechanism: ClassVar[str] = "the mitmproxy addon in the router, on WebSocket messages"
    needs: ClassVar[frozenset[Need]] = frozenset({"proxy"})

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        if ctx.proxy is None:
            raise MechanismError(f"{self.name} needs the proxy, which this run has not started")
        return await ctx.proxy.apply(self.step_id, self.name, self.params)

    async def revert(self, ctx: FaultContext) -> None:
        if ctx.proxy is not None:
            await ctx.proxy.revert([self.step_id])

    @property
    def held_by_run(self) -> bool:
        return False

    # In the proxy process.

    chosen: list[http.HTTPFlow]

    @abstractmethod
    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        """Start hurting; returns the details of the `fault.applied` event."""

    def disengage(self, proxy: ProxyView) -> None:
        """Stop hurting (what `revert` and `restore` do)."""

    def on_message(self, proxy: ProxyView, flow: http.HTTPFlow,
                   message: websocket.WebSocketMessage, kind: str) -> None:
        """A data message (of `kind` in the run's protocol, or "") the proxy is about to relay;
        `message.drop()` keeps it from its peer."""

    def on_control(self, flow: http.HTTPFlow, to_client: bool, event: WsEvent) -> bool:
        """Whether a ping or pong may pass."""
        return True

    def holds_events(self, flow: http.HTTPFlow, from_client: bool) -> bool:
        """Whether everything arriving from that side (bytes, its close, its FIN) is held back
        whole, unseen even by the message hooks."""
        return False

    def hits(self, flow: http.HTTPFlow) -> bool:
        """Whether `flow` is one this fault chose when it was applied."""
        return flow in self.chosen
