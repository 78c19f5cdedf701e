"""link_down: no parameters; it takes the router's end of the client link down, and up again."""

from __future__ import annotations

from .conftest import (
    FakeContext,
    apply_and_revert,
    assert_a_packet_fault_the_run_holds,
    build,
    params_of,
    refusal,
)


def test_it_has_no_parameters() -> None:
    """link_down takes no parameters, and refuses any (drop's `direction` included)."""
    assert params_of("link_down").model_dump() == {}
    assert refusal("link_down", {"direction": "both"}) == {"direction": "extra_forbidden"}
    assert refusal("link_down", {"link": "c0"}) == {"link": "extra_forbidden"}


def test_the_client_link_goes_down_and_comes_back_up() -> None:
    """Applying sets the router's client link down; reverting sets it up; nothing else changes."""
    ctx = FakeContext()
    details = apply_and_revert(build("link_down", step="cable"), ctx)
    assert details == {"link": "c0"}
    assert ctx.lab.ns("router").links == [("c0", False), ("c0", True)]
    assert ctx.lab.ns("client").links == [] and ctx.lab.ns("server").links == []
    for role in ("client", "router", "server"):
        assert ctx.lab.ns(role).calls == [], f"{role} ran something besides the link change"


def test_link_down_is_a_packet_fault_the_run_holds() -> None:
    """A profile without a target or a microphone may take the link down: the run starts nothing
    for it, records it at the packet layer and holds it, so a restore brings the link back up."""
    _, lab = assert_a_packet_fault_the_run_holds("link_down")
    assert lab.ns("router").links == [("c0", False), ("c0", True)]
