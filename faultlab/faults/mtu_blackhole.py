"""mtu_blackhole: the path's MTU shrinks and ICMP "fragmentation needed" is filtered, so packets
above the size vanish while smaller ones pass (the black hole behind VPNs and tunnels).

With the proxy in the path the fault adds no route: the proxy is a local sender, which reads a
route's MTU at its next segment (tcp_current_mss), and would then send small segments that pass.
Instead a rule on each leg (faultlab.faults.legs) drops what arrives from the far end longer than
`mtu`, in the hurt directions: each end's TCP meets the black hole on its own segments, as behind
a real one (and hears no ICMP either). What the proxy sends is not filtered: it re-segments what it
relays, and its own TLS handshake with the server is not the client's (measured: mitmproxy's
ClientHello, with a post-quantum key share, is 1,568 bytes where the client's is 517, so a
filter on the server leg toward the server stalled every reconnection the client's would pass).
"""

from __future__ import annotations

import errno
from typing import Any, ClassVar

from pydantic import Field
from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, register
from faultlab.faults.flows import Direction, OneWay, hurt_directions
from faultlab.faults.legs import LegChain, leg_matches, proxied
from faultlab.lab.netfilter import chain_name, install, uninstall

# RTAX_MTU's bit in a route's RTAX_LOCK metric: a locked MTU is not raised by PMTU discovery.
_LOCK_MTU = 1 << 2


class MtuBlackholeParams(FaultParams):
    """`mtu`: the path's MTU in bytes, below the links' 1500 and no lower than IPv4's 576;
    `direction`: which way the path shrinks."""

    mtu: int = Field(ge=576, le=1499, strict=True)
    """The path's MTU in bytes, 576-1499: a packet larger than this on the wire vanishes, and no
    ICMP tells its sender."""
    direction: Direction = "both"
    """Which way the path shrinks: `both`, `to_server` or `to_client`."""


def _shrink_route(address: str, mtu: int) -> str:
    """In the calling thread's namespace (the router's): a host route to `address`, by the way
    the router reaches it now, with a locked MTU of `mtu`; the egress link's name."""
    with IPRoute() as ipr:
        (now,) = ipr.route("get", dst=address)
        oif = now.get_attr("RTA_OIF")
        (link,) = ipr.get_links(oif)
        link_mtu, name = link.get_attr("IFLA_MTU"), link.get_attr("IFLA_IFNAME")
        if mtu >= link_mtu:
            raise MechanismError(f"mtu_blackhole: {mtu} bytes is not below the MTU of {name} "
                                 f"({link_mtu}), the router's way to {address}")
        ipr.route("add", dst=f"{address}/32", oif=oif, gateway=now.get_attr("RTA_GATEWAY"),
                  metrics={"mtu": mtu, "lock": _LOCK_MTU})
        return str(name)


def _remove_route(address: str) -> None:
    with IPRoute() as ipr:
        try:
            ipr.route("del", dst=f"{address}/32")
        except NetlinkError as exc:
            # Gone with its link (a link_down meanwhile flushes the routes through it).
            if exc.code != errno.ESRCH:
                raise


def _server_address(ctx: FaultContext) -> str:
    """Where the client's packets to the target go: the lab's server, or a remote target's
    address (pinned, or the one the client's connections went to)."""
    lab = ctx.lab
    if lab.target_link == lab.server_link:
        return str(lab.server_address)
    table = ctx.connections
    address = table.address or (table.connections[-1].server if table.connections else None)
    if address is None:
        raise MechanismError("mtu_blackhole toward a remote target needs its address: pin it "
                             "(`address` in `remote`) or let the client connect first")
    return address


@register
class MtuBlackhole(Fault[MtuBlackholeParams]):
    """Lower the router's MTU toward the hurt end(s) and filter the router's ICMP "fragmentation
    needed": a packet above `mtu` (with DF, as every TCP segment has) is dropped and its sender is
    never told, so it retransmits the same size forever; smaller packets pass.

    Measured at 1200 toward the server: a write of 1,148 bytes (1,200 on the wire with IP, TCP
    and timestamps) makes its round trip, one of 1,149 stalls, and everything behind it on the
    connection too; each retransmission draws an ICMP the filter drops. The client caches no
    path MTU (its `ip route get` shows none), so after revert nothing of the fault remains in
    either end: the stuck segment passes at the sender's next retransmission (0.24 s later, after
    a 0.6 s stall on the lab's sub-millisecond RTT; longer after a longer stall, as its backoff
    doubles)."""

    name: ClassVar[str] = "mtu_blackhole"
    mechanism: ClassVar[str] = ("a host route with a small MTU at the router, its ICMP "
                                "fragmentation-needed dropped in OUTPUT")
    layer: ClassVar[Layer] = "packet"
    Params = MtuBlackholeParams

    def __init__(self, step_id: str, params: MtuBlackholeParams) -> None:
        super().__init__(step_id, params)
        self._legs = LegChain(step_id)
        # The addresses whose routes it shrank.
        self._shrunk: list[str] = []

    def _ends(self, ctx: FaultContext) -> list[tuple[OneWay, str, str]]:
        """Per hurt way: the address whose route shrinks, and the router's link toward the
        sender, by which its ICMP would leave."""
        lab = ctx.lab
        ends = {"to_server": (_server_address(ctx), lab.client_link),
                "to_client": (str(lab.client_address), lab.target_link)}
        return [(way, *ends[way]) for way in hurt_directions(self.params.direction)]

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        if proxied(ctx):
            on_legs = [m for m in leg_matches(ctx, p.direction, None)[0] if m.inbound]
            await self._legs.install(ctx, on_legs, None,
                                     lambda i: f"-m length --length {p.mtu + 1}:65535 -j DROP")
            return {"mtu": p.mtu, "direction": p.direction, "legs": sorted(self._legs.legs)}
        # The filter first: no ICMP may leave between the route's change and it. A host route,
        # not the link's MTU: a veth drops what it *receives* above its own MTU unless GSO
        # (measured: with the router's s0 at 1200, the server's 1,300-byte segments toward the
        # client were counted as RX drops on s0), so a smaller link MTU would also eat the other
        # way's large packets. The forwarding path checks each GSO packet's segments against the
        # route's MTU, so aggregated packets are judged by the size they have on the wire.
        ends = self._ends(ctx)
        chain = chain_name(self.step_id)
        rules = [f"-o {link} -p icmp --icmp-type fragmentation-needed -j DROP"
                 for _, _, link in ends]
        await install(ctx.lab.router, ["OUTPUT"], chain, rules)
        links: dict[str, str] = {}
        try:
            for way, address, _ in ends:
                links[way] = await ctx.lab.router.run(_shrink_route, address, self.params.mtu)
                self._shrunk.append(address)
        except BaseException:
            await self.revert(ctx)
            raise
        return {"mtu": self.params.mtu, "direction": self.params.direction, "links": links}

    async def revert(self, ctx: FaultContext) -> None:
        if self._legs.installed:
            await self._legs.uninstall(ctx)
            return
        # Routes first, so that no packet in flight meets the small MTU with the filter gone;
        # the filter goes whatever became of the routes.
        try:
            while self._shrunk:
                await ctx.lab.router.run(_remove_route, self._shrunk.pop(0))
        finally:
            await uninstall(ctx.lab.router, ["OUTPUT"], chain_name(self.step_id))
