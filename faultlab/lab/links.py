"""The lab's links: the router's veth pair toward each end, an end addressed and routed, and the
wait until the kernel has brought them up. Each runs in the thread of a namespace
(`Namespace.call`)."""

from __future__ import annotations

import time
from ipaddress import IPv4Address, IPv4Interface
from pathlib import Path

from pyroute2 import IPRoute

from faultlab.errors import LabError
from faultlab.lab.namespace import write_sysctl

# The router's ends of the veth pairs get ifindexes (11, 12, ...) that the ends in the fresh client and server
# namespaces (lo 1, eth0 2) never have. The kernel's linkwatch takes a veth's carrier change as
# urgent only when its ifindex differs from its peer's (linkwatch_urgent_event); otherwise it
# handles it up to a second later: measured, the client's eth0 stayed operationally DOWN for
# ~1 s after every lab's setup when both ends were 2.
FIRST_ROUTER_IFINDEX = 11
# How long the lab's links get to come operationally up. Most often none: linkwatch handles
# them at once; it waits for the rtnl lock that other labs' setups and teardowns hold.
LINKS_UP_S = 5.0


def wire_router(ends: tuple[tuple[str, Path, IPv4Interface], ...]) -> None:
    """In the router's namespace: for each (its link's name, the end's namespace, its address) a
    veth pair whose other end is the namespace's eth0, and forwarding on."""
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        for index, (ifname, peer_ns, address) in enumerate(ends, FIRST_ROUTER_IFINDEX):
            ipr.link("add", ifname=ifname, kind="veth", index=index,
                     peer={"ifname": "eth0", "net_ns_fd": str(peer_ns)})
            ipr.addr("add", index=index, address=str(address.ip), prefixlen=address.network.prefixlen)
            ipr.link("set", index=index, state="up")
    write_sysctl("net.ipv4.ip_forward", 1)


def wait_links_up(ifnames: tuple[str, ...]) -> None:
    """Return once each of `ifnames` (in the calling thread's namespace) is operationally up: the
    kernel has handled its carrier, so its transmit queue sends instead of dropping (a lab whose
    first SYN is dropped connects a second late)."""
    deadline = time.monotonic() + LINKS_UP_S
    with IPRoute() as ipr:
        while True:
            states = {link.get_attr("IFLA_IFNAME"): link.get_attr("IFLA_OPERSTATE")
                      for link in ipr.get_links()}
            down = [name for name in ifnames if states.get(name) != "UP"]
            if not down:
                return
            if time.monotonic() > deadline:
                raise LabError(f"the lab's links {down} are not up after {LINKS_UP_S:g} s: "
                               f"{ {name: states.get(name) for name in down} }")
            time.sleep(0.005)


def configure_end(ifname: str, address: IPv4Interface, gateway: IPv4Address) -> None:
    """In an end's namespace: `ifname` addressed and up, its default route via the router."""
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.addr("add", index=index, address=str(address.ip), prefixlen=address.network.prefixlen)
        ipr.link("set", index=index, state="up")
        ipr.route("add", dst="0.0.0.0/0", gateway=str(gateway))
