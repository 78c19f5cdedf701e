"""nat_rebind: from the moment it fires, the client's packets reach the server from another source
port (and, with `address`, another address), as after a carrier-grade NAT rebinding: its TCP
connections' packets, or with `protocol: udp` its UDP flows' (a WebRTC call's ICE, RTP and data
channel).

The router SNATs the chosen flows on their way out to the target and forgets their conntrack
entries, so the next packet is tracked anew and takes the new source (a packet of a tracked flow
keeps the binding it got at the start). What each end then sees (measured in the netns lab): the
server gets a segment for a 4-tuple it has no socket for and answers it with a RST; the router maps
that RST back to the client's own port, where its sequence number is exactly the client's
rcv_nxt, so the client's connection is reset one round trip after its first packet since the
rebind. The server's old connection hears nothing more: what it sends to the old mapping is
dropped (a NAT has no binding for it any more) until its own timeouts give up. A UDP flow has
no connection to reset: the server hears the client's next datagram from the new source, and
what it sends to the old one is dropped.
"""

from __future__ import annotations

import socket
from ipaddress import IPv4Address
from typing import Any, ClassVar

from pydantic import Field, field_validator
from pyroute2 import Conntrack, IPRoute
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

from faultlab.connections import Transport
from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, register
from faultlab.faults.flows import FlowParams
from faultlab.lab.netfilter import chain_name, install, uninstall

# The ports a rebind picks from when no `port` is given (random-fully: never the old one but by
# a 1-in-64k chance).
PORTS = "1024-65535"
PROTOCOL_NUMBERS: dict[Transport, int] = {"tcp": socket.IPPROTO_TCP, "udp": socket.IPPROTO_UDP}


class NatRebindParams(FlowParams):
    """`port`: the new source port (one the NAT picks when absent); `address`: a new source
    address, given to the router's target-side link while the fault lasts (the client's own when
    absent); `connection`: which flows (all when absent, new ones included); `protocol`: TCP's
    or UDP's."""

    port: int | None = Field(default=None, ge=1, le=65535)
    """The new source port (1-65535); absent: one the NAT picks at random."""
    address: IPv4Address | None = None
    """A new source address too (a NAT's other public address), added to the router's target-side
    link while the fault lasts; absent: the client's own."""
    protocol: Transport = "tcp"
    """Whose flows are rebound: `tcp` (the client's connections to the target's port) or `udp`
    (every UDP flow from the client to the server's address, a WebRTC call's included)."""

    @field_validator("address")
    @classmethod
    def _routable(cls, value: IPv4Address | None) -> IPv4Address | None:
        if value is not None and (value.is_loopback or value.is_multicast or value.is_unspecified
                                  or value.is_link_local or value == IPv4Address("255.255.255.255")):
            raise ValueError("a NAT's public address: not loopback, multicast, link-local or "
                             "unspecified")
        return value


@register
class NatRebind(Fault[NatRebindParams]):
    """SNAT the chosen flows to a new source from now on; their conntrack entries are forgotten."""

    name: ClassVar[str] = "nat_rebind"
    mechanism: ClassVar[str] = ("iptables SNAT at the router, the flows' conntrack entries "
                                "deleted")
    layer: ClassVar[Layer] = "packet"
    Params = NatRebindParams

    @classmethod
    def proxy_problem(cls, params: FaultParams) -> str | None:
        if isinstance(params, NatRebindParams) and params.protocol == "udp":
            return None  # the proxy relays TCP: UDP goes past it, as the client sent it
        return ("cannot cross the proxy: the client's connection ends in the router and the "
                "server sees the proxy's own, which no rebind of the client's flow reaches")

    def matches(self, ctx: FaultContext) -> tuple[str, str, dict[str, Any]]:
        """iptables matches for the chosen flows (client to server, and server to the client's old
        port), and the flow as conntrack filters it."""
        lab = ctx.lab
        client, server = str(lab.client_address), str(lab.server_address)
        # A call's UDP goes to whatever port the server's ICE candidates name.
        server_port = ctx.connections.port if self.params.protocol == "tcp" else None
        flow: dict[str, Any] = {"client": client, "server": server, "server_port": server_port,
                                "client_port": None, "protocol": self.params.protocol}
        if self.params.connection is not None:
            conn = ctx.connections.select(self.params.connection)
            if conn is None:
                raise MechanismError(f"no TCP connection {self.params.connection!r} from client "
                                     "to target has been seen yet")
            flow = {"client": conn.client, "server": conn.server, "server_port": conn.server_port,
                    "client_port": conn.client_port, "protocol": "tcp"}
        up = f"-p {flow['protocol']} -s {flow['client']} -d {flow['server']}"
        down = f"-p {flow['protocol']} -s {flow['server']} -d {flow['client']}"
        if flow["client_port"] is not None:
            up += f" --sport {flow['client_port']}"
            down += f" --dport {flow['client_port']}"
        if flow["server_port"] is not None:
            up += f" --dport {flow['server_port']}"
            down += f" --sport {flow['server_port']}"
        return up, down, flow

    def source(self, ctx: FaultContext) -> str:
        """The SNAT target: the new address (or the client's own) and the new port (or range)."""
        p = self.params
        address = str(p.address) if p.address is not None else str(ctx.lab.client_address)
        if p.port is not None:
            return f"--to-source {address}:{p.port}"
        return f"--to-source {address}:{PORTS} --random-fully"

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p = self.params
        lab = ctx.lab
        if lab.target_link != lab.server_link:
            raise MechanismError("nat_rebind needs a target in the lab: behind the uplink the "
                                 "router's own NAT already rewrites the client's source")
        up, down, flow = self.matches(ctx)
        chain = chain_name(self.step_id)
        if p.address is not None:
            await lab.router.run(set_address, lab.target_link, str(p.address), True)
        await install(lab.router, ["POSTROUTING"], chain,
                      [f"-o {lab.target_link} {up} -j SNAT {self.source(ctx)}"], table="nat")
        # The server's packets to the old mapping: a NAT that rebound the client has no binding
        # for them (and, tracked, they would make the client's next packets replies, unmapped).
        await install(lab.router, ["FORWARD"], chain,
                      [f"-i {lab.target_link} {down} -m conntrack --ctstate NEW -j DROP"])
        forgotten = await lab.router.run(forget_flows, flow["client"], flow["client_port"],
                                         flow["server"], flow["server_port"], flow["protocol"])
        return {"connection": p.connection, "protocol": p.protocol,
                "client_port": flow["client_port"],
                "port": p.port, "address": str(p.address) if p.address else None,
                "forgotten": forgotten}

    async def revert(self, ctx: FaultContext) -> None:
        """The rules and the address go; flows already rebound keep their mapping, as in a NAT."""
        lab = ctx.lab
        chain = chain_name(self.step_id)
        await uninstall(lab.router, ["FORWARD"], chain)
        await uninstall(lab.router, ["POSTROUTING"], chain, table="nat")
        if self.params.address is not None:
            await lab.router.run(set_address, lab.target_link, str(self.params.address), False)


def forget_flows(client: str, client_port: int | None, server: str,
                 server_port: int | None, protocol: Transport = "tcp") -> int:
    """Delete the calling thread's namespace's conntrack entries of the `protocol` flows between
    `client` and `server` (either way, any port where None); how many went."""
    deleted = 0
    with Conntrack() as ct:
        for saddr, sport, daddr, dport in ((client, client_port, server, server_port),
                                           (server, server_port, client, client_port)):
            wanted = NFCTAttrTuple(proto=PROTOCOL_NUMBERS[protocol], saddr=saddr, daddr=daddr)
            for entry in list(ct.dump_entries(tuple_orig=wanted)):
                orig = entry.tuple_orig
                if sport not in (None, orig.sport) or dport not in (None, orig.dport):
                    continue
                ct.delete(entry)
                deleted += 1
    return deleted


def set_address(ifname: str, address: str, present: bool) -> None:
    """Add (or remove) `address`/32 on `ifname` in the calling thread's namespace."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.addr("add" if present else "del", index=index, address=address, prefixlen=32)
