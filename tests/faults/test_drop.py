"""drop: its parameters, the exact iptables batch it commits at the router or the client, and its
revert."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from faultlab.errors import MechanismError

from .conftest import (
    FakeContext,
    apply_and_revert,
    assert_a_packet_fault_the_run_holds,
    build,
    params_of,
    refusal,
    with_connections,
)

JUMP_ROUTER = "-I FORWARD 1 -j FL-cut"
REVERT_ROUTER = ["-D FORWARD -j FL-cut", "-F FL-cut", "-X FL-cut"]


def test_defaults_hurt_every_flow_both_ways_at_the_router() -> None:
    """With no parameters a drop hurts every flow, both ways, at the router."""
    assert params_of("drop").model_dump() == {"connection": None, "direction": "both",
                                              "at": "router", "protocol": None}


@pytest.mark.parametrize(("params", "field"), [
    ({"direction": "up"}, "direction"),
    ({"at": "server"}, "at"),
    ({"connection": "last"}, "connection"),
    ({"connection": 1.5}, "connection"),
    ({"rate": 0.5}, "rate"),
    ({"protocol": "sctp"}, "protocol"),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object], field: str) -> None:
    """A value out of its choices, or an unknown field, is refused naming that field."""
    assert list(refusal("drop", params)) == [field]


@pytest.mark.parametrize("k", [0, -1])
def test_connection_numbers_below_one_are_refused(k: int) -> None:
    """`connection: 0` names no connection, so the profile refuses it (not the run, later)."""
    assert list(refusal("drop", {"connection": k})) == ["connection"]


def test_drop_at_the_router_discards_both_ways_then_reverts_cleanly() -> None:
    """A drop at the router is one chain jumped to first from FORWARD, dropping what enters and
    leaves the client link; its revert removes exactly that jump and that chain."""
    ctx = FakeContext()
    details = apply_and_revert(build("drop", step="cut"), ctx)
    assert details == {"direction": "both", "at": "router", "connection": None}
    assert ctx.lab.ns("router").batches == [
        [":FL-cut - [0:0]", "-A FL-cut -i c0 -j DROP", "-A FL-cut -o c0 -j DROP", JUMP_ROUTER],
        REVERT_ROUTER,
    ]
    assert ctx.lab.ns("client").calls == [] and ctx.lab.ns("server").calls == []


@pytest.mark.parametrize(("direction", "rule"), [
    ("to_server", "-A FL-cut -i c0 -j DROP"),
    ("to_client", "-A FL-cut -o c0 -j DROP"),
])
def test_one_direction_is_one_rule(direction: str, rule: str) -> None:
    """`to_server` drops what comes in from the client link, `to_client` what goes out on it."""
    ctx = FakeContext()
    apply_and_revert(build("drop", {"direction": direction}, step="cut"), ctx)
    assert ctx.lab.ns("router").batches[0] == [":FL-cut - [0:0]", rule, JUMP_ROUTER]


def test_a_protocol_drops_only_its_packets() -> None:
    """`protocol: udp` (UDP blocked, as a firewall that lets only TCP through) matches UDP alone,
    and says so; it takes no connection, which is a TCP connection."""
    ctx = FakeContext()
    details = apply_and_revert(build("drop", {"protocol": "udp", "direction": "to_server"},
                                     step="cut"), ctx)
    assert details["protocol"] == "udp"
    assert ctx.lab.ns("router").batches[0] == [":FL-cut - [0:0]", "-A FL-cut -i c0 -p udp -j DROP",
                                               JUMP_ROUTER]
    with pytest.raises(ValidationError, match="'protocol: udp' takes no 'connection'"):
        params_of("drop", {"protocol": "udp", "connection": "first"})


def test_drop_at_the_client_uses_its_own_interface() -> None:
    """`at: client` drops in the client's namespace: OUTPUT and INPUT jump to the chain, which
    matches the client's eth0 (out toward the server, in from it)."""
    ctx = FakeContext()
    details = apply_and_revert(build("drop", {"at": "client", "direction": "both"}, step="cut"),
                               ctx)
    assert details["at"] == "client"
    assert ctx.lab.ns("client").batches == [
        [":FL-cut - [0:0]", "-A FL-cut -o eth0 -j DROP", "-A FL-cut -i eth0 -j DROP",
         "-I OUTPUT 1 -j FL-cut", "-I INPUT 1 -j FL-cut"],
        ["-D OUTPUT -j FL-cut", "-D INPUT -j FL-cut", "-F FL-cut", "-X FL-cut"],
    ]
    assert ctx.lab.ns("router").calls == []


def test_one_connection_is_matched_by_its_addresses_and_ports() -> None:
    """`connection: 2` drops only the second connection the capture saw, by both ends' address and
    port in each direction."""
    ctx = with_connections(FakeContext(), 40001, 40002, 40003)
    details = apply_and_revert(build("drop", {"connection": 2}, step="cut"), ctx)
    assert details["connection"] == 2
    assert ctx.lab.ns("router").batches[0] == [
        ":FL-cut - [0:0]",
        "-A FL-cut -i c0 -p tcp -s 10.0.1.2 --sport 40002 -d 10.0.2.2 --dport 443 -j DROP",
        "-A FL-cut -o c0 -p tcp -s 10.0.2.2 --sport 443 -d 10.0.1.2 --dport 40002 -j DROP",
        JUMP_ROUTER,
    ]


def test_latest_connection_at_the_client() -> None:
    """`connection: latest` at the client matches the newest connection on the client's eth0."""
    ctx = with_connections(FakeContext(), 40001, 40002)
    apply_and_revert(build("drop", {"connection": "latest", "at": "client",
                                    "direction": "to_server"}, step="cut"), ctx)
    assert ctx.lab.ns("client").batches[0] == [
        ":FL-cut - [0:0]",
        "-A FL-cut -o eth0 -p tcp -s 10.0.1.2 --sport 40002 -d 10.0.2.2 --dport 443 -j DROP",
        "-I OUTPUT 1 -j FL-cut", "-I INPUT 1 -j FL-cut",
    ]


def test_an_unseen_connection_fails_and_installs_nothing() -> None:
    """A connection the capture has not seen yet is a mechanism failure, and no rule goes in."""
    ctx = with_connections(FakeContext(), 40001)
    with pytest.raises(MechanismError, match="no TCP connection 2 from client to target"):
        asyncio.run(build("drop", {"connection": 2}, step="cut").apply(ctx))
    assert ctx.lab.ns("router").calls == []


def test_the_chain_is_named_after_the_whole_step_id() -> None:
    """The longest step id a profile allows (24 characters) still names its chain whole."""
    ctx = FakeContext()
    apply_and_revert(build("drop", step="a" * 24), ctx)
    assert ctx.lab.ns("router").batches[1][-1] == "-X FL-" + "a" * 24


def test_drop_is_a_packet_fault_the_run_holds() -> None:
    """A profile without a target or a microphone may drop: the run starts nothing for it,
    records it at the packet layer and holds it, so a restore removes its chain."""
    _, lab = assert_a_packet_fault_the_run_holds("drop")
    assert lab.ns("router").batches[-1] == ["-D FORWARD -j FL-s1", "-F FL-s1", "-X FL-s1"]
