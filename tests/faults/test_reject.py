"""reject: its parameters, the exact REJECT rules it commits at the router for each `toward`, and
its revert."""

from __future__ import annotations

import asyncio

import pytest

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

RESET = "-j REJECT --reject-with tcp-reset"


def test_defaults_reset_both_ends_of_every_flow() -> None:
    """With no parameters a reject resets both ends of every flow."""
    assert params_of("reject").model_dump() == {"connection": None, "toward": "both"}


@pytest.mark.parametrize(("params", "field"), [
    ({"toward": "router"}, "toward"),
    ({"toward": "to_client"}, "toward"),
    ({"direction": "both"}, "direction"),
    ({"at": "client"}, "at"),
    ({"connection": "any"}, "connection"),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object], field: str) -> None:
    """A value out of its choices, or a field reject does not have (drop's `direction`, `at`), is
    refused naming that field."""
    assert list(refusal("reject", params)) == [field]


def test_reject_both_resets_tcp_both_ways_then_reverts_cleanly() -> None:
    """`toward: both` rejects TCP from either end with a reset, from a chain jumped to first from
    the router's FORWARD; the revert removes exactly that jump and that chain."""
    ctx = FakeContext()
    details = apply_and_revert(build("reject", step="rst"), ctx)
    assert details == {"toward": "both", "connection": None}
    assert ctx.lab.ns("router").batches == [
        [":FL-rst - [0:0]", f"-A FL-rst -i c0 -p tcp {RESET}", f"-A FL-rst -o c0 -p tcp {RESET}",
         "-I FORWARD 1 -j FL-rst"],
        ["-D FORWARD -j FL-rst", "-F FL-rst", "-X FL-rst"],
    ]
    assert ctx.lab.ns("client").calls == [] and ctx.lab.ns("server").calls == []


@pytest.mark.parametrize(("toward", "rule"), [
    # The reset goes to the sender of the rejected packet.
    ("client", f"-A FL-rst -i c0 -p tcp {RESET}"),
    ("server", f"-A FL-rst -o c0 -p tcp {RESET}"),
])
def test_toward_one_end_rejects_what_that_end_sends(toward: str, rule: str) -> None:
    """Resetting the client rejects what it sends (in on the client link); resetting the server
    rejects what it sends (out on the client link)."""
    ctx = FakeContext()
    apply_and_revert(build("reject", {"toward": toward}, step="rst"), ctx)
    assert ctx.lab.ns("router").batches[0] == [":FL-rst - [0:0]", rule, "-I FORWARD 1 -j FL-rst"]


def test_one_connection_is_matched_by_its_addresses_and_ports() -> None:
    """`connection: first` resets only the first connection, matched by both ends' address and
    port (and TCP only once)."""
    ctx = with_connections(FakeContext(), 50000, 50001)
    apply_and_revert(build("reject", {"connection": "first", "toward": "client"}, step="rst"), ctx)
    assert ctx.lab.ns("router").batches[0] == [
        ":FL-rst - [0:0]",
        f"-A FL-rst -i c0 -p tcp -s 10.0.1.2 --sport 50000 -d 10.0.2.2 --dport 443 {RESET}",
        "-I FORWARD 1 -j FL-rst",
    ]


def test_an_unseen_connection_fails_and_installs_nothing() -> None:
    """A connection the capture has not seen is a mechanism failure; no rule goes in."""
    ctx = FakeContext()
    with pytest.raises(MechanismError, match="no TCP connection 'latest'"):
        asyncio.run(build("reject", {"connection": "latest"}, step="rst").apply(ctx))
    assert ctx.lab.ns("router").calls == []


def test_reject_is_a_packet_fault_the_run_holds() -> None:
    """A profile without a target or a microphone may reject: the run starts nothing for it,
    records it at the packet layer and holds it, so a restore removes its chain."""
    _, lab = assert_a_packet_fault_the_run_holds("reject")
    assert lab.ns("router").batches[-1] == ["-D FORWARD -j FL-s1", "-F FL-s1", "-X FL-s1"]
