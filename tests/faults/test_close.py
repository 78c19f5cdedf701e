"""close: its parameters (the code range, the reason's 123 bytes), and the close frame it asks
each chosen flow's WebSocket layer to send."""

from __future__ import annotations

import pytest

from faultlab.proxy.internals import CloseInjected

from .conftest import assert_lives_in_the_proxy, assert_run_side, params_of, refusal
from .fake_proxy import Proxy


def test_defaults_close_both_ends_normally() -> None:
    """With no parameters close sends 1000 with no reason to both ends."""
    assert params_of("close").model_dump() == {"connection": None, "code": 1000, "reason": "",
                                               "to": "both"}


@pytest.mark.parametrize("code", [1000, 3000, 4999])
def test_codes_in_range_are_accepted(code: int) -> None:
    """Codes from 1000 to 4999 are accepted."""
    assert params_of("close", {"code": code}).model_dump()["code"] == code


@pytest.mark.parametrize(("params", "refused"), [
    ({"code": 999}, {"code": "greater_than_equal"}),
    ({"code": 5000}, {"code": "less_than_equal"}),
    ({"reason": "a" * 124}, {"reason": "value_error"}),
    # 62 two-byte characters: 124 bytes, though only 62 characters.
    ({"reason": "é" * 62}, {"reason": "value_error"}),
    ({"to": "proxy"}, {"to": "literal_error"}),
    ({"legs": "both"}, {"legs": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """A code outside 1000-4999, a reason over 123 bytes (UTF-8), a destination out of its choices
    or an unknown field is refused naming the field."""
    assert refusal("close", params) == refused


def test_a_reason_of_123_bytes_is_accepted() -> None:
    """A reason of exactly 123 bytes fits a close frame."""
    assert params_of("close", {"reason": "a" * 123}).model_dump()["reason"] == "a" * 123


@pytest.mark.parametrize("code", [1004, 1005, 1006, 1015, 2000])
def test_codes_no_endpoint_may_send_are_refused(code: int) -> None:
    """RFC 6455 7.4: 1004, 1005, 1006 and 1015 are never sent, 1016-2999 are unassigned."""
    assert refusal("close", {"code": code}) == {"code": "value_error"}


# internals.inject_close runs for real: only the server's inject_event is faked.


@pytest.mark.parametrize(("to", "to_client", "to_server"), [
    ("client", True, False), ("server", False, True), ("both", True, True)])
def test_it_asks_the_layer_to_close_the_chosen_ends(proxy: Proxy, to: str, to_client: bool,
                                                    to_server: bool) -> None:
    """Engaging asks the flow's WebSocket layer for a close frame with the code and reason, to the
    chosen ends; close is not kept as an active fault."""
    flow = proxy.open_flow()
    reply = proxy.apply("bye", "close", {"code": 4001, "reason": "maintenance", "to": to})
    assert reply.details == {"code": 4001, "reason": "maintenance", "to": to, "flows": 1}
    (event,) = proxy.server.events
    assert isinstance(event, CloseInjected)
    assert (event.flow, event.code, event.reason, event.to_client, event.to_server) == (
        flow, 4001, "maintenance", to_client, to_server)
    assert proxy.server.injected == []
    assert proxy.state.active == {}


def test_only_the_chosen_connection_is_closed(proxy: Proxy) -> None:
    """`connection: 2` closes the second connection's flow only."""
    proxy.open_flow()
    second = proxy.open_flow()
    assert proxy.apply("bye", "close", {"connection": 2}).details["flows"] == 1
    assert [e.flow for e in proxy.server.events] == [second]


def test_the_run_asks_the_proxy() -> None:
    """The run's side of close is a request to the proxy."""
    assert_run_side("close", {"code": 1011})


def test_it_lives_in_the_proxy_and_a_restore_finds_nothing_to_revert(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it
    and records it at the app layer; a close cannot be taken back, so the proxy keeps nothing and
    a restore reverts nothing."""
    assert_lives_in_the_proxy(proxy, "close", {"code": 1011}, restore_reverts=False)
    assert len(proxy.server.events) == 1
