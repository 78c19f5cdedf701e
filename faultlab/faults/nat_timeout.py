"""nat_timeout: the router forgets a flow left idle for `idle`, as a stateful NAT does, and then
drops (or resets) what arrives on it; a keep-alive more frequent than `idle` keeps it alive."""

from __future__ import annotations

import errno
import math
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator
from pyroute2 import Conntrack
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

from faultlab.connections import Connection
from faultlab.faults.base import Fault, FaultContext, Layer, register
from faultlab.faults.flows import Direction, FlowParams, iptables_matches
from faultlab.lab.namespace import write_sysctl
from faultlab.lab.netfilter import chain_name, install, uninstall
from faultlab.model import Duration

# Per network namespace: the router's own, never the host's.
TIMEOUT = "net.netfilter.nf_conntrack_tcp_timeout_established"
# 0: a packet of no known flow that is not a SYN is not picked up as a new flow, so it is INVALID.
LOOSE = "net.netfilter.nf_conntrack_tcp_loose"
# 1: a packet outside the window conntrack knows is not INVALID; a NAT forgets flows, it does not
# police their windows (and an adopted flow's window is unknown until it sends).
LIBERAL = "net.netfilter.nf_conntrack_tcp_be_liberal"
_TCP = 6
_ESTABLISHED = 3
# IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED: a flow seen both ways, as an established one is
# (measured, kernel 6.18: without CONFIRMED ctnetlink refuses a status with EBUSY).
_SEEN_AND_ASSURED = 0x2 | 0x4 | 0x8
_ACTIONS = {"drop": "DROP", "reset": "REJECT --reject-with tcp-reset"}


class NatTimeoutParams(FlowParams):
    """`idle`: how long a flow may be silent before the router forgets it (whole seconds, as
    conntrack counts them); `then`: a packet of a forgotten flow is dropped, or answered with a
    reset toward its sender; `direction`: which way's packets meet that fate."""

    idle: Duration = Field(ge=1, le=432_000)
    then: Literal["drop", "reset"] = "drop"
    direction: Direction = "both"

    @field_validator("idle")
    @classmethod
    def _whole_seconds(cls, seconds: float) -> float:
        if seconds != math.floor(seconds):
            raise ValueError("conntrack counts whole seconds: give 1s, 30s, 2m...")
        return seconds


def _read_sysctls(names: list[str]) -> dict[str, str]:
    """In the calling thread's namespace: the current values of sysctls `names`."""
    return {name: Path("/proc/sys", *name.split(".")).read_text().strip() for name in names}


def _write_sysctls(values: dict[str, str | int]) -> None:
    for name, value in values.items():
        write_sysctl(name, value)


def _adopt(flows: list[Connection], idle_s: int) -> int:
    """In the calling thread's namespace (the router's): an established conntrack entry for each
    flow not tracked yet, as if the NAT had seen it open; the number adopted."""
    adopted = 0
    with Conntrack() as ct:
        for flow in flows:
            up = NFCTAttrTuple(saddr=flow.client, daddr=flow.server, proto=_TCP,
                               sport=flow.client_port, dport=flow.server_port)
            down = NFCTAttrTuple(saddr=flow.server, daddr=flow.client, proto=_TCP,
                                 sport=flow.server_port, dport=flow.client_port)
            info = {"attrs": [("CTA_PROTOINFO_TCP",
                               {"attrs": [("CTA_PROTOINFO_TCP_STATE", _ESTABLISHED)]})]}
            try:
                ct.entry("add", tuple_orig=up, tuple_reply=down, timeout=idle_s,
                         status=_SEEN_AND_ASSURED, protoinfo=info)
            except NetlinkError as exc:
                if exc.code != errno.EEXIST:  # tracked since its SYN (or picked up): keep that
                    raise
            else:
                adopted += 1
    return adopted


@register
class NatTimeout(Fault[NatTimeoutParams]):
    """Conntrack in the router's namespace with `idle` as the established-flow timeout, no
    mid-stream pickup, and a rule that drops (or rejects) the INVALID TCP packets of the chosen
    flows: once a flow has been silent for `idle`, its entry expires and its next packet, in
    either direction, belongs to no flow."""

    name: ClassVar[str] = "nat_timeout"
    mechanism: ClassVar[str] = ("conntrack's established timeout set to the idle time in the "
                                "router's namespace, INVALID TCP dropped or rejected in FORWARD")
    layer: ClassVar[Layer] = "packet"
    Params = NatTimeoutParams

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        router = ctx.lab.router
        idle_s = int(p.idle)
        matches = iptables_matches(ctx, p.direction, p.connection, at_client=False,
                                   tcp_only=True)
        # The rule first: its conntrack match switches tracking on in the namespace if nothing
        # had (no proxy, no uplink), while pickup is still on, so nothing is INVALID yet.
        await install(router, ["FORWARD"], chain_name(self.step_id),
                      [f"{m} -m conntrack --ctstate INVALID -j {_ACTIONS[p.then]}"
                       for m in matches])
        self._saved = await router.run(_read_sysctls, [TIMEOUT, LIBERAL, LOOSE])
        await router.run(_write_sysctls, {TIMEOUT: idle_s, LIBERAL: 1})
        # Flows opened before tracking began have no entry: adopt those the capture saw, so that
        # their idle clock starts now instead of their next packet being INVALID (measured:
        # without adoption a flow kept alive every 0.3 s from before apply died at apply). Pickup
        # goes off last.
        adopted = await router.run(_adopt, list(ctx.connections.connections), idle_s)
        await router.run(_write_sysctls, {LOOSE: 0})
        return {"idle_s": idle_s, "then": p.then, "direction": p.direction,
                "connection": p.connection, "adopted": adopted}

    async def revert(self, ctx: FaultContext) -> None:
        # Pickup back on first: a forgotten flow's next packet starts a new entry, and the flow
        # lives again, as behind a NAT that never forgot it.
        await ctx.lab.router.run(_write_sysctls, dict(reversed(self._saved.items())))
        await uninstall(ctx.lab.router, ["FORWARD"], chain_name(self.step_id))
