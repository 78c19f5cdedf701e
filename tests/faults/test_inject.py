"""inject: its parameters, and the one message it sends into each chosen flow when engaged."""

from __future__ import annotations

import pytest

from .conftest import assert_lives_in_the_proxy, assert_run_side, params_of, refusal
from .fake_proxy import Injected, Proxy

GO_AWAY = {"goAway": {"timeLeft": "1s"}}


def test_to_and_message_are_required() -> None:
    """`to` and `message` have no defaults; a message is text or a mapping."""
    assert refusal("inject", {}) == {"to": "missing", "message": "missing"}
    assert params_of("inject", {"to": "client", "message": "hi"}).model_dump() == {
        "connection": None, "to": "client", "message": "hi"}
    assert params_of("inject", {"to": "server", "message": GO_AWAY}).model_dump()["message"] == GO_AWAY


@pytest.mark.parametrize(("params", "refused"), [
    ({"to": "both", "message": "hi"}, {"to": "literal_error"}),
    ({"to": "client", "message": 5}, {"message": "string_type"}),
    ({"to": "client", "message": ["a"]}, {"message": "string_type"}),
    ({"to": "client", "message": "hi", "binary": True}, {"binary": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """A destination out of its choices, a message that is neither text nor a mapping, or an
    unknown field is refused naming the field."""
    assert refusal("inject", params) == refused


def test_text_goes_to_the_client_once_on_engage(proxy: Proxy) -> None:
    """Engaging sends the text once, as a text message toward the client, into every live flow;
    inject is not kept as an active fault."""
    one, two = proxy.open_flow(), proxy.open_flow()
    reply = proxy.apply("say", "inject", {"to": "client", "message": "héllo"})
    assert reply.details == {"to": "client", "flows": 2, "bytes": 6}
    assert proxy.server.injected == [Injected(one, True, "héllo".encode(), True),
                                     Injected(two, True, "héllo".encode(), True)]
    assert proxy.state.active == {}
    assert proxy.send(one, b"later", from_client=False).dropped is False
    assert len(proxy.server.injected) == 2


def test_a_mapping_goes_as_json_to_the_chosen_connection(proxy: Proxy) -> None:
    """A mapping is sent as its JSON text toward the server, into the chosen connection only."""
    proxy.open_flow()
    second = proxy.open_flow()
    reply = proxy.apply("say", "inject", {"to": "server", "message": GO_AWAY,
                                          "connection": "latest"})
    assert reply.details == {"to": "server", "flows": 1, "bytes": 30}
    assert proxy.server.injected == [Injected(second, False, b'{"goAway": {"timeLeft": "1s"}}',
                                              True)]


def test_no_live_flow_sends_nothing(proxy: Proxy) -> None:
    """With no live flow there is nowhere to send: nothing is injected."""
    flow = proxy.open_flow()
    flow.live = False
    assert proxy.apply("say", "inject", {"to": "client", "message": "x"}).details["flows"] == 0
    assert proxy.server.injected == []


def test_the_run_asks_the_proxy() -> None:
    """The run's side of inject is a request to the proxy."""
    assert_run_side("inject", {"to": "client", "message": GO_AWAY})


def test_it_lives_in_the_proxy_and_a_restore_finds_nothing_to_revert(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it
    and records it at the app layer; once sent the message is gone, so the proxy keeps nothing
    and a restore reverts nothing (and sends nothing again)."""
    assert_lives_in_the_proxy(proxy, "inject", {"to": "client", "message": GO_AWAY},
                              restore_reverts=False)
    assert len(proxy.server.injected) == 1
