"""thaw: its parameters, which freezes it ends, and whether what they held is delivered or
discarded."""

from __future__ import annotations

import pytest

from faultlab.proxy.internals import WakeInjected

from .conftest import assert_lives_in_the_proxy, assert_run_side, params_of, refusal
from .fake_proxy import Injected, Proxy


def test_defaults_thaw_every_freeze_and_deliver() -> None:
    """With no parameters thaw ends every active freeze and delivers what they held."""
    params = params_of("thaw")
    assert params.model_dump() == {"faults": [], "discard": False}
    assert list(params_of("thaw", {"faults": ["frz"]}).referenced_steps()) == ["frz"]


@pytest.mark.parametrize(("params", "refused"), [
    ({"faults": "frz"}, {"faults": "list_type"}),
    ({"discard": "maybe"}, {"discard": "bool_parsing"}),
    ({"deliver": True}, {"deliver": "extra_forbidden"}),
    ({"connection": "first"}, {"connection": "extra_forbidden"}),  # it ends steps, not flows
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """`faults` is a list, `discard` a boolean; an unknown field is refused, `connection` too
    (the freezes it ends chose their connections)."""
    assert refusal("thaw", params) == refused


def test_thaw_delivers_what_each_freeze_held(proxy: Proxy) -> None:
    """A thaw with no ids ends every freeze (stalls and network ones), delivers their messages in
    order, wakes the network freeze's flow without discarding, and is not kept itself."""
    flow = proxy.open_flow()
    proxy.apply("stall", "freeze", {"mode": "stall", "direction": "to_server"})
    proxy.apply("net", "freeze", {"direction": "to_client"})
    proxy.apply("mute", "drop_message", {"kind": "toolCall"})
    proxy.send(flow, b"up1", from_client=True)
    proxy.send(flow, b"up2", from_client=True)
    reply = proxy.apply("go", "thaw")
    assert reply.details == {"thawed": ["stall", "net"], "held_messages": 2, "discarded": False}
    assert list(proxy.state.active) == ["mute"]
    assert proxy.server.injected == [Injected(flow, False, b"up1", True),
                                     Injected(flow, False, b"up2", True)]
    assert [(e.flow, e.discard) for e in proxy.server.events if isinstance(e, WakeInjected)] == [
        (flow, False)]


def test_thaw_discard_delivers_nothing(proxy: Proxy) -> None:
    """`discard: true` ends the freeze and throws away what it held; a network freeze's flow is
    woken with its held data to be discarded too (internals.wake runs for real)."""
    flow = proxy.open_flow()
    proxy.apply("net", "freeze")
    proxy.send(flow, b"lost", from_client=False)
    reply = proxy.apply("go", "thaw", {"discard": True})
    assert reply.details == {"thawed": ["net"], "held_messages": 1, "discarded": True}
    assert proxy.server.injected == []
    assert [(e.flow, e.discard) for e in proxy.server.events if isinstance(e, WakeInjected)] == [
        (flow, True)]
    assert proxy.state.active == {}


def test_thaw_by_id_ends_only_those_freezes(proxy: Proxy) -> None:
    """`faults: [a]` ends freeze `a` and leaves freeze `b` holding."""
    flow = proxy.open_flow()
    proxy.apply("a", "freeze", {"mode": "stall", "direction": "to_server"})
    proxy.apply("b", "freeze", {"mode": "stall", "direction": "to_client"})
    proxy.send(flow, b"up", from_client=True)
    proxy.send(flow, b"down", from_client=False)
    reply = proxy.apply("go", "thaw", {"faults": ["a"]})
    assert reply.details == {"thawed": ["a"], "held_messages": 1, "discarded": False}
    assert list(proxy.state.active) == ["b"]
    assert proxy.server.injected == [Injected(flow, False, b"up", True)]
    assert proxy.send(flow, b"still down", from_client=False).dropped is True


def test_thaw_with_no_freeze_does_nothing(proxy: Proxy) -> None:
    """With no freeze engaged a thaw ends nothing and reports so."""
    proxy.open_flow()
    proxy.apply("mute", "drop_message")
    reply = proxy.apply("go", "thaw", {"faults": ["mute"]})
    assert reply.ok is True
    assert reply.details == {"thawed": [], "held_messages": 0, "discarded": False}
    assert list(proxy.state.active) == ["mute"]


def test_the_run_asks_the_proxy() -> None:
    """The run's side of thaw is a request to the proxy."""
    assert_run_side("thaw", {"faults": ["frz"], "discard": True})


def test_it_lives_in_the_proxy_and_a_restore_finds_nothing_to_revert(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it
    and records it at the app layer; it ends the freeze it names and is not kept itself, so a
    restore after it reverts nothing."""
    run = assert_lives_in_the_proxy(
        proxy, "thaw", {"faults": ["frz"]}, restore_reverts=False,
        before=[{"id": "frz", "do": {"fault": "freeze", "mode": "stall"}}])
    assert run.held_by_proxy == [["frz"], [], []]
    assert run.applied("s1")["thawed"] == ["frz"]
    assert run.reverted() == []
