"""nat_timeout: the router forgets a flow left idle for `idle`, as a stateful NAT does, and then
drops (or resets) what arrives on it; a keep-alive more frequent than `idle` keeps it alive.

With the proxy in the path conntrack tracks both legs (the REDIRECT needs it): each leg is a flow
the router forgets after `idle`. A packet of a forgotten flow is INVALID, has no conntrack entry
to match by (so the legs' rules match by headers), and is no longer redirected: the client's goes
the direct way, to FORWARD, where the direct path's rule drops or rejects it as without the
proxy; the server's reaches the router's INPUT, where a rule on the server leg does. What the
proxy sends on a forgotten leg is dropped (rejecting it would reset the proxy's own socket), all
but resets: those REJECT sends for `then: reset` leave by OUTPUT too, with no flow either.
"""

from __future__ import annotations

import errno
import math
from pathlib import Path
from typing import Any, ClassVar, Literal
from weakref import WeakKeyDictionary

from pydantic import Field, field_validator
from pyroute2 import Conntrack
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

from faultlab.connections import Connection
from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, Layer, register
from faultlab.faults.flows import Direction, FlowParams, hurt_directions, iptables_matches, selected
from faultlab.faults.legs import LegChain, proxied
from faultlab.lab.namespace import Namespace, write_sysctl
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
    """How long a flow may be silent before the router forgets it: a duration in whole seconds
    (`30s`, `2m`; conntrack counts seconds), at most 5 days."""
    then: Literal["drop", "reset"] = "drop"
    """What meets a packet of a forgotten flow: `drop`, or `reset` (a TCP reset toward its
    sender)."""
    direction: Direction = "both"
    """Which way's packets on a forgotten flow meet `then`: `both`, `to_server` or `to_client`.
    It and `connection` choose only whose packets meet `then`: the router forgets every idle flow,
    whatever its direction or connection."""

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


def _shorten(idle_s: int) -> int:
    """In the calling thread's namespace (the router's): every established TCP flow conntrack
    tracks already (since its SYN: the proxy's REDIRECT or the uplink's masquerade switched
    tracking on) is given `idle_s` left, as the new timeout would at its next packet; the number
    shortened. A flow silent from now on would else keep the old timeout (5 days) to the end."""
    shortened = 0
    with Conntrack() as ct:
        for entry in list(ct.dump_entries(tuple_orig=NFCTAttrTuple(proto=_TCP))):
            if entry.protoinfo is None or entry.protoinfo.state != _ESTABLISHED:
                continue
            if entry.timeout is not None and entry.timeout <= idle_s:
                continue
            try:
                ct.entry("set", tuple_orig=entry.tuple_orig, timeout=idle_s)
            except NetlinkError as exc:
                if exc.code != errno.ENOENT:  # gone meanwhile: nothing to shorten
                    raise
            else:
                shortened += 1
    return shortened


def _on_legs(ctx: FaultContext, p: NatTimeoutParams) -> list[str]:
    """The legs' rules: per hurt direction, what arrives at the router on a forgotten server leg
    meets `then`, and what the proxy sends on a forgotten leg is dropped. The client's packets
    on a forgotten client leg are not redirected any more: the FORWARD rule takes them."""
    lab, port, action = ctx.lab, ctx.connections.port, _ACTIONS[p.then]
    invalid = "-m conntrack --ctstate INVALID"
    conn = selected(ctx, p.connection)
    to_client = f" --dport {conn.client_port} -d {conn.client}" if conn else ""
    server_up = server_down = f" --dport {port}" if port else ""
    if conn is not None:
        upstream = ctx.connections.upstreams.get(conn.client_port)
        if upstream is None:
            raise MechanismError(f"nat_timeout: the proxy has not reported the server leg of "
                                 f"connection {p.connection!r} yet")
        server_up = (f" -s {upstream.address} --sport {upstream.port}"
                     f" -d {upstream.server} --dport {upstream.server_port}")
        server_down = (f" -s {upstream.server} --sport {upstream.server_port}"
                       f" -d {upstream.address} --dport {upstream.port}")
    elif port:
        server_down = f" --sport {port}"
    # A reset leaving the router is let through: the resets REJECT sends (`then: reset`) leave
    # by OUTPUT too, and belong to no flow either.
    sent = f"! --tcp-flags RST RST {invalid} -j DROP"
    rules = []
    for way in hurt_directions(p.direction):
        if way == "to_server":
            rules.append(f"-o {lab.target_link} -p tcp{server_up} {sent}")
        else:
            rules.append(f"-i {lab.target_link} -p tcp{server_down} {invalid} -j {action}")
            rules.append(f"-o {lab.client_link} -p tcp{to_client} {sent}")
    return rules


@register
class NatTimeout(Fault[NatTimeoutParams]):
    """Conntrack in the router's namespace with `idle` as the established-flow timeout, no
    mid-stream pickup, and a rule that drops (or rejects) the INVALID TCP packets of the chosen
    flows: once a flow has been silent for `idle`, its entry expires and its next packet, in
    either direction, belongs to no flow. The settings are the namespace's: every idle flow is
    forgotten (the rule chooses whose packets meet `then`), and one step holds them at a time."""

    name: ClassVar[str] = "nat_timeout"
    mechanism: ClassVar[str] = ("conntrack's established timeout set to the idle time in the "
                                "router's namespace, INVALID TCP dropped or rejected in FORWARD")
    layer: ClassVar[Layer] = "packet"
    Params = NatTimeoutParams

    # The step holding each router's conntrack settings: they are the namespace's, one NAT's.
    _holder: ClassVar[WeakKeyDictionary[Namespace, str]] = WeakKeyDictionary()

    def __init__(self, step_id: str, params: NatTimeoutParams) -> None:
        super().__init__(step_id, params)
        self._legs = LegChain(step_id)
        # The router's conntrack settings before the step, once read.
        self._saved: dict[str, str] = {}

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        router = ctx.lab.router
        holder = self._holder.get(router)
        if holder is not None:
            raise MechanismError(f"nat_timeout: step {holder!r} already sets the router's NAT "
                                 f"timeout (one NAT per path): restore it first")
        self._holder[router] = self.step_id
        idle_s = int(p.idle)
        matches = iptables_matches(ctx, p.direction, p.connection, at_client=False,
                                   protocol="tcp")
        # The rule first: its conntrack match switches tracking on in the namespace if nothing
        # had (no proxy, no uplink), while pickup is still on, so nothing is INVALID yet.
        try:
            await install(router, ["FORWARD"], chain_name(self.step_id),
                          [f"{m} -m conntrack --ctstate INVALID -j {_ACTIONS[p.then]}"
                           for m in matches])
        except BaseException:
            del self._holder[router]
            raise
        try:
            if proxied(ctx):
                await self._legs.install_rules(ctx, _on_legs(ctx, p), ["client", "server"])
            self._saved = await router.run(_read_sysctls, [TIMEOUT, LIBERAL, LOOSE])
            await router.run(_write_sysctls, {TIMEOUT: idle_s, LIBERAL: 1})
            # Flows opened before tracking began have no entry: adopt those the capture saw, so
            # that their idle clock starts now instead of their next packet being INVALID
            # (measured: without adoption a flow kept alive every 0.3 s from before apply died
            # at apply). Pickup goes off last.
            adopted = await router.run(_adopt, list(ctx.connections.connections), idle_s)
            shortened = await router.run(_shorten, idle_s)
            await router.run(_write_sysctls, {LOOSE: 0})
        except BaseException:
            await self.revert(ctx)
            raise
        details = {"idle_s": idle_s, "then": p.then, "direction": p.direction,
                   "connection": p.connection, "adopted": adopted, "shortened": shortened}
        return details | ({"legs": sorted(self._legs.legs)} if self._legs.installed else {})

    async def revert(self, ctx: FaultContext) -> None:
        router = ctx.lab.router
        if self._holder.get(router) == self.step_id:
            del self._holder[router]
        try:
            # Pickup back on first: a forgotten flow's next packet starts a new entry, and the
            # flow lives again, as behind a NAT that never forgot it.
            if self._saved:
                saved, self._saved = self._saved, {}
                await router.run(_write_sysctls, dict(reversed(saved.items())))
        finally:
            try:
                await uninstall(router, ["FORWARD"], chain_name(self.step_id))
            finally:
                await self._legs.uninstall(ctx)
