"""drop: packets silently vanish, like a phone leaving Wi-Fi; neither end is told.

With the proxy in the path it drops on both legs of the proxied connections too
(faultlab.faults.legs): the client's packets vanish before the proxy, and the server hears nothing
from the proxy for them (nor does the proxy hear the server). `at: client` drops the client leg in
the client's namespace, and the server leg at the router.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from faultlab.connections import Transport
from faultlab.faults.base import Fault, FaultContext, Layer, register
from faultlab.faults.flows import Direction, FlowParams, iptables_matches
from faultlab.faults.legs import LEGS, LegChain, leg_matches, proxied
from faultlab.lab.namespace import Namespace
from faultlab.lab.netfilter import chain_name, install, uninstall


class DropParams(FlowParams):
    """`direction`, `connection`, `protocol`, and `at`: the router (both ends see silence) or the
    client's own namespace (the client's TCP sees local drops, as the field study's round 3
    did)."""

    direction: Direction = "both"
    """Which way's packets are dropped: `both`, `to_server` or `to_client`."""
    at: Literal["router", "client"] = "router"
    """Where they are dropped: at the `router` (neither end is told) or in the `client`'s own
    namespace (its TCP sees local drops)."""
    protocol: Transport | None = None
    """Only the packets of this protocol, `udp` or `tcp`: `udp` blocks UDP as a firewall that
    lets only TCP through does (a WebRTC client must then reach its TURN server over TCP or
    TLS); absent: every packet."""


@register
class Drop(Fault[DropParams]):
    """Silently discard the selected packets until reverted."""

    name: ClassVar[str] = "drop"
    mechanism: ClassVar[str] = "iptables DROP at the router (or in the client's namespace)"
    layer: ClassVar[Layer] = "packet"
    Params = DropParams

    def __init__(self, step_id: str, params: DropParams) -> None:
        super().__init__(step_id, params)
        self._legs = LegChain(step_id)

    def _where(self, ctx: FaultContext) -> tuple[Namespace, list[str]]:
        if self.params.at == "client":
            return ctx.lab.client, ["OUTPUT", "INPUT"]
        return ctx.lab.router, ["FORWARD"]

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        ns, hooks = self._where(ctx)
        matches = iptables_matches(ctx, p.direction, p.connection, p.at == "client", p.protocol)
        await install(ns, hooks, chain_name(self.step_id), [f"{m} -j DROP" for m in matches])
        details: dict[str, Any] = {"direction": p.direction, "at": p.at,
                                   "connection": p.connection}
        if p.protocol is not None:
            details["protocol"] = p.protocol
        if proxied(ctx) and p.protocol != "udp":  # the proxy relays TCP only
            legs = LEGS if p.at == "router" else LEGS[1:]
            try:
                on_legs, conn = leg_matches(ctx, p.direction, p.connection, legs)
                await self._legs.install(ctx, on_legs, conn, lambda i: "-j DROP")
            except BaseException:
                await uninstall(ns, hooks, chain_name(self.step_id))
                raise
            details["legs"] = list(legs)
        return details

    async def revert(self, ctx: FaultContext) -> None:
        ns, hooks = self._where(ctx)
        try:
            await self._legs.uninstall(ctx)
        finally:
            await uninstall(ns, hooks, chain_name(self.step_id))
