"""mtu_blackhole: its parameters, the ICMP filter and the small-MTU routes it puts in the router,
in which order, and its revert."""

from __future__ import annotations

import asyncio
import errno

import pytest
from pyroute2.netlink.exceptions import NetlinkError

from faultlab.connections import ConnectionTable
from faultlab.errors import MechanismError
from faultlab.faults.mtu_blackhole import _remove_route, _shrink_route
from faultlab.lab.netfilter import commit

from .conftest import (
    SERVER,
    FakeContext,
    FakeLab,
    FakeProxyChannel,
    apply_and_revert,
    assert_a_packet_fault_the_run_holds,
    build,
    params_of,
    refusal,
    with_connections,
)

FILTER_TO_CLIENT = "-A FL-mtu -o c0 -p icmp --icmp-type fragmentation-needed -j DROP"
FILTER_TO_SERVER = "-A FL-mtu -o s0 -p icmp --icmp-type fragmentation-needed -j DROP"
LEG_CLIENT = "-p tcp -m conntrack --ctorigdstport 443 --ctstate DNAT"
LEG_SERVER = "-p tcp -m conntrack --ctorigdstport 443"
LONGER = "-m length --length 1201:65535 -j DROP"
UNINSTALL = (commit, (["-D OUTPUT -j FL-mtu", "-F FL-mtu", "-X FL-mtu"], "filter"))


def test_defaults_shrink_both_ways() -> None:
    """Only `mtu` is required; the path shrinks both ways unless told."""
    assert params_of("mtu_blackhole", {"mtu": 1200}).model_dump() == {"mtu": 1200,
                                                                       "direction": "both"}


@pytest.mark.parametrize(("params", "field"), [
    ({}, "mtu"),
    ({"mtu": 575}, "mtu"),
    ({"mtu": 1500}, "mtu"),
    ({"mtu": "1200"}, "mtu"),
    ({"mtu": 1200.5}, "mtu"),
    ({"mtu": 1200, "direction": "up"}, "direction"),
    ({"mtu": 1200, "connection": 1}, "connection"),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object], field: str) -> None:
    """A missing or out-of-range MTU (576-1499 bytes), a bad direction, or a field it has not (a
    link's MTU is no connection's) is refused naming that field."""
    assert list(refusal("mtu_blackhole", params)) == [field]


def test_both_ways_filters_icmp_first_then_shrinks_both_routes() -> None:
    """The ICMP filter goes in OUTPUT before any route shrinks; revert removes the routes first,
    then the filter."""
    ctx = FakeContext()
    details = apply_and_revert(build("mtu_blackhole", {"mtu": 1200}, step="mtu"), ctx)
    assert details["mtu"] == 1200 and details["direction"] == "both"
    assert ctx.lab.ns("router").calls == [
        (commit, ([":FL-mtu - [0:0]", FILTER_TO_CLIENT, FILTER_TO_SERVER,
                   "-I OUTPUT 1 -j FL-mtu"], "filter")),
        (_shrink_route, ("10.0.2.2", 1200)),
        (_shrink_route, ("10.0.1.2", 1200)),
        (_remove_route, ("10.0.2.2",)),
        (_remove_route, ("10.0.1.2",)),
        UNINSTALL,
    ]
    assert ctx.lab.ns("client").calls == [] and ctx.lab.ns("server").calls == []


@pytest.mark.parametrize(("direction", "address", "rule"), [
    ("to_server", "10.0.2.2", FILTER_TO_CLIENT),
    ("to_client", "10.0.1.2", FILTER_TO_SERVER),
])
def test_one_way_shrinks_the_route_toward_that_end(direction: str, address: str,
                                                   rule: str) -> None:
    """`to_server` shrinks the route to the server and filters the ICMP that would go back to
    the client; `to_client` the reverse."""
    ctx = FakeContext()
    apply_and_revert(build("mtu_blackhole", {"mtu": 900, "direction": direction}, step="mtu"),
                     ctx)
    assert ctx.lab.ns("router").calls == [
        (commit, ([":FL-mtu - [0:0]", rule, "-I OUTPUT 1 -j FL-mtu"], "filter")),
        (_shrink_route, (address, 900)), (_remove_route, (address,)), UNINSTALL,
    ]


def test_mtu_blackhole_is_a_packet_fault_the_run_holds() -> None:
    """The run starts nothing for it, holds it, and a restore removes its routes and filter."""
    _, lab = assert_a_packet_fault_the_run_holds("mtu_blackhole", {"mtu": 1200})
    assert lab.ns("router").calls[-1] == (commit, (["-D OUTPUT -j FL-s1", "-F FL-s1", "-X FL-s1"],
                                                   "filter"))


@pytest.mark.parametrize(("direction", "rules", "legs"), [
    ("both", [f"-A FLP-mtu -i c0 {LEG_CLIENT} {LONGER}", f"-A FLP-mtu -i s0 {LEG_SERVER} {LONGER}"],
     ["client", "server"]),
    ("to_server", [f"-A FLP-mtu -i c0 {LEG_CLIENT} {LONGER}"], ["client"]),
    ("to_client", [f"-A FLP-mtu -i s0 {LEG_SERVER} {LONGER}"], ["server"]),
])
def test_with_the_proxy_what_arrives_from_either_end_above_the_mtu_is_dropped(
        direction: str, rules: list[str], legs: list[str]) -> None:
    """With the proxy: no route shrinks (the proxy, a local sender, would adapt its segments to
    it) and no ICMP filter (nothing is forwarded): a chain on the legs drops what arrives from the
    client (toward the server) or from the server (toward the client) longer than the MTU; what
    the proxy sends passes. Revert removes the chain."""
    ctx = FakeContext(connections=ConnectionTable(443), proxy=FakeProxyChannel())
    details = apply_and_revert(build("mtu_blackhole", {"mtu": 1200, "direction": direction},
                                     step="mtu"), ctx)
    assert details == {"mtu": 1200, "direction": direction, "legs": legs}
    assert ctx.lab.ns("router").batches == [
        [":FLP-mtu - [0:0]", *rules, "-I INPUT 1 -j FLP-mtu", "-I OUTPUT 1 -j FLP-mtu"],
        ["-D INPUT -j FLP-mtu", "-D OUTPUT -j FLP-mtu", "-F FLP-mtu", "-X FLP-mtu"]]


class UplinkLab(FakeLab):
    """The fake lab with its target behind an uplink."""

    @property
    def target_link(self) -> str:
        return "up0"


def test_toward_a_remote_target_the_route_to_its_address_shrinks() -> None:
    """Behind the uplink the target is not the lab's server: the route that shrinks is the one
    to the address the client's connections go to (pinned, or the latest connection's); with
    none known yet the step fails, having changed nothing."""
    ctx = FakeContext(lab=UplinkLab(), connections=ConnectionTable(443, "10.0.2.2"))
    apply_and_revert(build("mtu_blackhole", {"mtu": 1200, "direction": "to_server"},
                           step="mtu"), ctx)
    assert (_shrink_route, ("10.0.2.2", 1200)) in ctx.lab.ns("router").calls
    found = with_connections(FakeContext(lab=UplinkLab(), connections=ConnectionTable(443)),
                             40001)
    apply_and_revert(build("mtu_blackhole", {"mtu": 1200, "direction": "to_server"},
                           step="mtu"), found)
    assert (_shrink_route, (SERVER, 1200)) in found.lab.ns("router").calls
    unknown = FakeContext(lab=UplinkLab(), connections=ConnectionTable(443))
    with pytest.raises(MechanismError, match="needs its address"):
        asyncio.run(build("mtu_blackhole", {"mtu": 1200}, step="mtu").apply(unknown))
    assert unknown.lab.ns("router").calls == []


def test_removing_a_route_its_link_took_with_it_is_no_error() -> None:
    """A route gone before the revert (its link went down meanwhile, which flushes the routes
    through it) is no error: the revert goes on to remove the ICMP filter."""
    calls: list[str] = []

    class Gone:
        def route(self, *args: object, **kwargs: object) -> None:
            calls.append(str(args[0]))
            raise NetlinkError(errno.ESRCH, "No such process")

        def __enter__(self) -> Gone:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("faultlab.faults.mtu_blackhole.IPRoute", Gone)
        _remove_route("10.0.2.2")
    assert calls == ["del"]
