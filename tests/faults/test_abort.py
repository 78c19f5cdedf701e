"""abort: its `legs` parameter, and which TCP legs of each chosen flow it asks to reset."""

from __future__ import annotations

from typing import Any

import pytest
from mitmproxy import http

from faultlab.proxy import internals

from .conftest import assert_lives_in_the_proxy, assert_run_side, params_of, refusal
from .fake_proxy import Proxy


@pytest.fixture
def resets(monkeypatch: pytest.MonkeyPatch) -> list[tuple[http.HTTPFlow, bool, bool]]:
    """The legs abort asks internals.abort to reset, recorded instead of reset: the real one
    aborts the live flow's transports, which a test flow does not have."""
    calls: list[tuple[http.HTTPFlow, bool, bool]] = []

    def abort(server: Any, flow: http.HTTPFlow, client: bool, server_leg: bool) -> list[str]:
        calls.append((flow, client, server_leg))
        return [leg for leg, wanted in (("client", client), ("server", server_leg)) if wanted]

    monkeypatch.setattr(internals, "abort", abort)
    return calls


def test_defaults_reset_both_legs() -> None:
    """With no parameters abort resets both legs, so neither end gets mitmproxy's clean close."""
    assert params_of("abort").model_dump() == {"connection": None, "legs": "both"}


@pytest.mark.parametrize(("params", "refused"), [
    ({"legs": "router"}, {"legs": "literal_error"}),
    ({"code": 1006}, {"code": "extra_forbidden"}),
    ({"connection": "second"}, {"connection": "literal_error"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """Legs out of their choices, an unknown field (abort sends no close code) or a bad connection
    is refused naming the field."""
    assert refusal("abort", params) == refused


@pytest.mark.parametrize(("legs", "client", "server"), [
    ("both", True, True), ("client", True, False), ("server", False, True)])
def test_it_resets_the_chosen_legs(proxy: Proxy, resets: list[tuple[http.HTTPFlow, bool, bool]],
                                   legs: str, client: bool, server: bool) -> None:
    """Engaging resets the chosen legs of the live flow at once and reports them; abort is not
    kept as an active fault."""
    flow = proxy.open_flow()
    reply = proxy.apply("cut", "abort", {"legs": legs})
    assert reply.ok is True
    assert resets == [(flow, client, server)]
    assert reply.details == {"legs": legs,
                             "reset": [leg for leg, on in (("client", client), ("server", server))
                                       if on]}
    assert proxy.state.active == {}


def test_every_live_flow_is_reset(proxy: Proxy, resets: list[tuple[http.HTTPFlow, bool, bool]]
                                  ) -> None:
    """Without `connection` every live flow is reset; the legs reset are listed flow by flow."""
    one, two = proxy.open_flow(), proxy.open_flow()
    gone = proxy.open_flow()
    gone.live = False
    reply = proxy.apply("cut", "abort")
    assert resets == [(one, True, True), (two, True, True)]
    assert reply.details["reset"] == ["client", "server", "client", "server"]


def test_a_flow_without_a_live_connection_resets_nothing(proxy: Proxy) -> None:
    """The real internals.abort resets nothing for a flow whose connection the server no longer
    has (the fake server has none)."""
    proxy.open_flow()
    assert proxy.apply("cut", "abort").details == {"legs": "both", "reset": []}


def test_the_run_asks_the_proxy() -> None:
    """The run's side of abort is a request to the proxy."""
    assert_run_side("abort", {"legs": "client"})


def test_it_lives_in_the_proxy_and_a_restore_finds_nothing_to_revert(
        proxy: Proxy, resets: list[tuple[http.HTTPFlow, bool, bool]]) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it
    and records it at the app layer; a reset cannot be taken back, so the proxy keeps nothing and
    a restore reverts nothing."""
    assert_lives_in_the_proxy(proxy, "abort", {"legs": "client"}, restore_reverts=False)
    assert [(client, server) for _, client, server in resets] == [(True, False)]
