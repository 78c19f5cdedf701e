"""link_down: the client's cable is pulled; its interface loses carrier until `restore`."""

from __future__ import annotations

from typing import Any, ClassVar

from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, register


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

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        await ctx.lab.router.set_link_state(ctx.lab.client_link, up=False)
        return {"link": ctx.lab.client_link}

    async def revert(self, ctx: FaultContext) -> None:
        await ctx.lab.router.set_link_state(ctx.lab.client_link, up=True)
