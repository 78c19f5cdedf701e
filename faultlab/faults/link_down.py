"""link_down: the client's cable is pulled; its interface loses carrier until `restore`.

With the proxy in the path the proxy would still hold the server leg of the client's connections,
answering the server as if the client were there: while the link is down the server leg of every
proxied connection is dropped too (faultlab.faults.legs), so the server hears silence.
"""

from __future__ import annotations

from typing import Any, ClassVar

from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, register
from faultlab.faults.legs import LEGS, LegChain, leg_matches, proxied


class LinkDownParams(FaultParams):
    """No parameters: the link between the client and the router goes down."""


@register
class LinkDown(Fault[LinkDownParams]):
    """Take the router's end of the client link down: the client sees NO-CARRIER, keeps its
    address and routes, and every packet either way is lost until the link comes back."""

    name: ClassVar[str] = "link_down"
    mechanism: ClassVar[str] = "the router's end of the client link set down"
    layer: ClassVar[Layer] = "packet"
    Params = LinkDownParams

    def __init__(self, step_id: str, params: LinkDownParams) -> None:
        super().__init__(step_id, params)
        self._legs = LegChain(step_id)

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        details: dict[str, Any] = {"link": ctx.lab.client_link}
        if proxied(ctx):
            on_legs, _ = leg_matches(ctx, "both", None, LEGS[1:])
            await self._legs.install(ctx, on_legs, None, lambda i: "-j DROP")
            # The client leg is hurt by the link itself, the server leg by the rules.
            details["legs"] = ["client", "server"]
        try:
            await ctx.lab.router.set_link_state(ctx.lab.client_link, up=False)
        except BaseException:
            await self._legs.uninstall(ctx)
            raise
        return details

    async def revert(self, ctx: FaultContext) -> None:
        try:
            await ctx.lab.router.set_link_state(ctx.lab.client_link, up=True)
        finally:
            await self._legs.uninstall(ctx)
