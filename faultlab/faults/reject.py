"""reject: the router answers the selected TCP packets with a reset, so the connection dies loudly."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from faultlab.faults.base import Fault, FaultContext, Layer, register
from faultlab.faults.flows import Direction, FlowParams, iptables_matches
from faultlab.lab.netfilter import chain_name, install, uninstall

# A rejected packet resets its sender: resetting the client means rejecting what it sends.
_HURT: dict[str, Direction] = {"both": "both", "client": "to_server", "server": "to_client"}


class RejectParams(FlowParams):
    """`toward`: which end gets the RST (it is sent in answer to that end's next packet)."""

    toward: Literal["both", "client", "server"] = "both"


@register
class Reject(Fault[RejectParams]):
    """Answer every selected TCP packet with a TCP reset toward its sender until reverted."""

    name: ClassVar[str] = "reject"
    mechanism: ClassVar[str] = "iptables REJECT with tcp-reset at the router"
    layer: ClassVar[Layer] = "packet"
    Params = RejectParams

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        matches = iptables_matches(ctx, _HURT[p.toward], p.connection, at_client=False,
                                   tcp_only=True)
        rules = [f"{m} -j REJECT --reject-with tcp-reset" for m in matches]
        await install(ctx.lab.router, ["FORWARD"], chain_name(self.step_id), rules)
        return {"toward": p.toward, "connection": p.connection}

    async def revert(self, ctx: FaultContext) -> None:
        await uninstall(ctx.lab.router, ["FORWARD"], chain_name(self.step_id))
