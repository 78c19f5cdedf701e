"""nat_rebind: its parameters, the SNAT and DROP rules it commits at the router, the conntrack
entries it forgets, the address it lends the target-side link, and its revert."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from faultlab.connections import ConnectionTable
from faultlab.errors import MechanismError, ProfileError
from faultlab.faults import FAULTS
from faultlab.faults.nat_rebind import forget_flows
from faultlab.lab.netfilter import commit

from .conftest import (
    CLIENT,
    SERVER,
    FakeContext,
    apply_and_revert,
    assert_a_packet_fault_the_run_holds,
    build,
    params_of,
    refusal,
    validate,
    with_connections,
)

SNAT_ONE = (f"-A FL-nat -o s0 -p tcp -s {CLIENT} -d {SERVER} --sport 50001 --dport 443 -j SNAT "
            f"--to-source {CLIENT}:1024-65535 --random-fully")
DROP_ONE = (f"-A FL-nat -i s0 -p tcp -s {SERVER} -d {CLIENT} --dport 50001 --sport 443 "
            "-m conntrack --ctstate NEW -j DROP")


def router_calls(ctx: FakeContext) -> list[tuple[str, Any]]:
    """What ran at the router, in order: ('filter'|'nat', batch) for iptables, else (name, args)."""
    out: list[tuple[str, Any]] = []
    for fn, args in ctx.lab.ns("router").calls:
        if fn is commit:
            batch, table = args
            out.append((str(table), list(batch)))  # type: ignore[call-overload]
        else:
            out.append((fn.__name__, args))
    return out


def test_defaults_rebind_every_flow_to_a_port_the_nat_picks() -> None:
    """With no parameters every flow is rebound, to the client's own address and a new port."""
    assert params_of("nat_rebind").model_dump() == {"connection": None, "port": None,
                                                    "address": None, "protocol": "tcp"}


@pytest.mark.parametrize(("params", "field"), [
    ({"port": 0}, "port"),
    ({"port": 70000}, "port"),
    ({"address": "127.0.0.9"}, "address"),
    ({"address": "224.0.0.1"}, "address"),
    ({"address": "not-an-address"}, "address"),
    ({"toward": "client"}, "toward"),
    ({"protocol": "sctp"}, "protocol"),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object], field: str) -> None:
    """A port out of range, an address no NAT would use, or a field it lacks, is refused by name."""
    assert list(refusal("nat_rebind", params)) == [field]


def test_one_connection_is_rebound_and_its_old_mapping_dropped_then_reverted() -> None:
    """`connection: latest`: a SNAT of that flow's packets leaving toward the target (nat
    POSTROUTING), a DROP of what the server sends to the old mapping (FORWARD), then that flow's
    conntrack entries forgotten; the revert removes both chains and nothing else."""
    ctx = with_connections(FakeContext(), 50000, 50001)
    details = apply_and_revert(build("nat_rebind", {"connection": "latest"}, step="nat"), ctx)
    assert details == {"connection": "latest", "protocol": "tcp", "client_port": 50001,
                       "port": None, "address": None, "forgotten": None}
    assert router_calls(ctx) == [
        ("nat", [":FL-nat - [0:0]", SNAT_ONE, "-I POSTROUTING 1 -j FL-nat"]),
        ("filter", [":FL-nat - [0:0]", DROP_ONE, "-I FORWARD 1 -j FL-nat"]),
        ("forget_flows", (CLIENT, 50001, SERVER, 443, "tcp")),
        ("filter", ["-D FORWARD -j FL-nat", "-F FL-nat", "-X FL-nat"]),
        ("nat", ["-D POSTROUTING -j FL-nat", "-F FL-nat", "-X FL-nat"]),
    ]
    assert ctx.lab.ns("client").calls == [] and ctx.lab.ns("server").calls == []


def test_a_new_address_and_port_lives_on_the_target_link_while_the_fault_lasts() -> None:
    """`address` and `port`: the address is added to the router's target-side link before the
    SNAT to exactly that address and port, and removed after the rules on revert."""
    ctx = with_connections(FakeContext(), 50001)
    apply_and_revert(build("nat_rebind", {"connection": 1, "port": 40000,
                                          "address": "203.0.113.7"}, step="nat"), ctx)
    calls = router_calls(ctx)
    assert calls[0] == ("set_address", ("s0", "203.0.113.7", True))
    assert calls[1][1][1].endswith("-j SNAT --to-source 203.0.113.7:40000")
    assert calls[-1] == ("set_address", ("s0", "203.0.113.7", False))
    assert len(calls) == 7


def test_every_flow_to_the_target_port_when_no_connection_is_named() -> None:
    """No `connection`: every flow from the client to the target's port, new ones included."""
    ctx = FakeContext(connections=ConnectionTable(port=8765))
    apply_and_revert(build("nat_rebind", step="nat"), ctx)
    calls = router_calls(ctx)
    assert calls[0][1][1] == (f"-A FL-nat -o s0 -p tcp -s {CLIENT} -d {SERVER} --dport 8765 "
                              f"-j SNAT --to-source {CLIENT}:1024-65535 --random-fully")
    assert calls[1][1][1] == (f"-A FL-nat -i s0 -p tcp -s {SERVER} -d {CLIENT} --sport 8765 "
                              "-m conntrack --ctstate NEW -j DROP")
    assert calls[2] == ("forget_flows", (CLIENT, None, SERVER, 8765, "tcp"))


def test_udp_rebinds_every_datagram_flow_to_the_server() -> None:
    """`protocol: udp`: every UDP flow from the client to the server's address, whatever its
    port (a call's ICE candidates name it); a proxied run's UDP goes past the proxy."""
    ctx = FakeContext(connections=ConnectionTable(port=8765))
    apply_and_revert(build("nat_rebind", {"protocol": "udp"}, step="nat"), ctx)
    calls = router_calls(ctx)
    assert calls[0][1][1] == (f"-A FL-nat -o s0 -p udp -s {CLIENT} -d {SERVER} "
                              f"-j SNAT --to-source {CLIENT}:1024-65535 --random-fully")
    assert calls[1][1][1] == (f"-A FL-nat -i s0 -p udp -s {SERVER} -d {CLIENT} "
                              "-m conntrack --ctstate NEW -j DROP")
    assert calls[2] == ("forget_flows", (CLIENT, None, SERVER, None, "udp"))
    fault = FAULTS["nat_rebind"]
    with pytest.raises(ValueError, match="a connection is a TCP connection"):
        fault.Params(protocol="udp", connection="latest")
    assert fault.proxy_problem(fault.Params(protocol="udp")) is None
    assert fault.proxy_problem(fault.Params()) is not None


def test_an_unseen_connection_fails_and_touches_nothing() -> None:
    """A connection the capture has not seen is a mechanism failure; nothing runs at the router."""
    ctx = FakeContext()
    with pytest.raises(MechanismError, match="no TCP connection 2"):
        asyncio.run(build("nat_rebind", {"connection": 2}).apply(ctx))
    assert ctx.lab.ns("router").calls == []


def test_forget_flows_deletes_the_chosen_entries_either_way(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """Entries of the flow tracked from either end go; another port's stays."""
    from faultlab.faults import nat_rebind

    class Tuple:
        def __init__(self, sport: int, dport: int) -> None:
            self.sport, self.dport = sport, dport

    class Entry:
        def __init__(self, sport: int, dport: int) -> None:
            self.tuple_orig = Tuple(sport, dport)

    tables = {CLIENT: [Entry(50001, 443), Entry(50002, 443)], SERVER: [Entry(443, 50001)]}
    deleted: list[Entry] = []

    class FakeConntrack:
        def __enter__(self) -> FakeConntrack:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def dump_entries(self, tuple_orig: Any) -> list[Entry]:
            assert tuple_orig.proto == 6
            return tables[tuple_orig.saddr]

        def delete(self, entry: Entry) -> None:
            deleted.append(entry)

    monkeypatch.setattr(nat_rebind, "Conntrack", FakeConntrack)
    assert forget_flows(CLIENT, 50001, SERVER, 443) == 2
    assert [(e.tuple_orig.sport, e.tuple_orig.dport) for e in deleted] == [(50001, 443),
                                                                           (443, 50001)]


def test_nat_rebind_is_a_packet_fault_the_run_holds() -> None:
    """Without a target or microphone the run starts nothing for it, records it at the packet
    layer and holds it, so a restore removes its rules."""
    _, lab = assert_a_packet_fault_the_run_holds("nat_rebind")
    assert lab.ns("router").calls[-1][1] == (["-D POSTROUTING -j FL-s1", "-F FL-s1", "-X FL-s1"],
                                             "nat")


def test_the_proxy_in_the_path_is_refused_with_the_reason() -> None:
    """Behind the proxy the server sees the proxy's connection, which no rebind reaches."""
    with pytest.raises(ProfileError, match="nat_rebind cannot cross the proxy"):
        validate("nat_rebind", before=[{"id": "fz", "do": {"fault": "freeze"}}])
