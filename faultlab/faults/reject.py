"""reject: the router answers the selected TCP packets with a reset, so the connection dies loudly.

With the proxy in the path the end to reset is reached on its own leg (faultlab.faults.legs): what
the client sends to the proxy is rejected to reset the client, what the server sends to the proxy
to reset the server. A REJECT of what the proxy sends would reset the proxy's own socket instead.
The other end is told nothing, as without the proxy: the reset end's answer (a reset of its own)
is rejected too, which drops it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from faultlab.faults.base import Fault, FaultContext, Layer, register
from faultlab.faults.flows import Direction, FlowParams, iptables_matches
from faultlab.faults.legs import LegChain, leg_matches, proxied
from faultlab.lab.netfilter import chain_name, install, uninstall

# A rejected packet resets its sender: resetting the client means rejecting what it sends.
_HURT: dict[str, Direction] = {"both": "both", "client": "to_server", "server": "to_client"}


class RejectParams(FlowParams):
    """`toward`: which end gets the RST (it is sent in answer to that end's next packet)."""

    toward: Literal["both", "client", "server"] = "both"
    """Which end is reset: `both`, `client` or `server`; the RST answers that end's next packet."""


@register
class Reject(Fault[RejectParams]):
    """Answer every selected TCP packet with a TCP reset toward its sender until reverted."""

    name: ClassVar[str] = "reject"
    mechanism: ClassVar[str] = "iptables REJECT with tcp-reset at the router"
    layer: ClassVar[Layer] = "packet"
    Params = RejectParams

    def __init__(self, step_id: str, params: RejectParams) -> None:
        super().__init__(step_id, params)
        self._legs = LegChain(step_id)

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        matches = iptables_matches(ctx, _HURT[p.toward], p.connection, at_client=False,
                                   protocol="tcp")
        rules = [f"{m} -j REJECT --reject-with tcp-reset" for m in matches]
        await install(ctx.lab.router, ["FORWARD"], chain_name(self.step_id), rules)
        if not proxied(ctx):
            return {"toward": p.toward, "connection": p.connection}
        try:
            on_legs, conn = leg_matches(ctx, _HURT[p.toward], p.connection)
            inbound = [m for m in on_legs if m.inbound]
            await self._legs.install(ctx, inbound, conn,
                                     lambda i: "-j REJECT --reject-with tcp-reset")
        except BaseException:
            await uninstall(ctx.lab.router, ["FORWARD"], chain_name(self.step_id))
            raise
        return {"toward": p.toward, "connection": p.connection,
                "legs": [m.leg for m in inbound]}

    async def revert(self, ctx: FaultContext) -> None:
        try:
            await self._legs.uninstall(ctx)
        finally:
            await uninstall(ctx.lab.router, ["FORWARD"], chain_name(self.step_id))
