"""freeze: its parameters, what it holds in each mode (messages, control frames, whole events),
and how its revert delivers what it held, in order."""

from __future__ import annotations

import pytest
import wsproto.events

from faultlab.frames import FrameMatch
from faultlab.proxy.control import Arm, ArmedStep
from faultlab.proxy.internals import WakeInjected

from .conftest import assert_lives_in_the_proxy, assert_run_side, params_of, refusal
from .fake_proxy import Injected, Proxy

TOOL_CALL = {"toolCall": {"functionCalls": [{"id": "c1", "name": "book", "args": {}}]}}
TURN_DONE = {"serverContent": {"turnComplete": True}}
PING, PONG = wsproto.events.Ping(), wsproto.events.Pong()


def test_defaults_freeze_the_network_both_ways() -> None:
    """With no parameters a freeze holds everything, both ways."""
    assert params_of("freeze").model_dump() == {"connection": None, "mode": "network",
                                                "direction": "both"}


@pytest.mark.parametrize(("params", "refused"), [
    ({"mode": "pause"}, {"mode": "literal_error"}),
    ({"direction": "to_router"}, {"direction": "literal_error"}),
    ({"for": "1s"}, {"for": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """A mode or direction out of its choices, or an unknown field (a freeze has no duration), is
    refused naming the field."""
    assert refusal("freeze", params) == refused


def test_stall_holds_messages_and_delivers_them_in_order_on_revert(proxy: Proxy) -> None:
    """A stall drops every data message as it comes and keeps it; on revert each is sent on to
    its peer in the order it came, text or binary as it was."""
    flow = proxy.open_flow()
    reply = proxy.apply("frz", "freeze", {"mode": "stall"})
    assert reply.details == {"mode": "stall", "direction": "both"}
    sent = [proxy.send(flow, b"c1", from_client=True),
            proxy.send(flow, TURN_DONE, from_client=False),
            proxy.send(flow, b"\x00c2", from_client=True, binary=True)]
    assert all(m.dropped for m in sent)
    assert proxy.server.injected == []
    assert proxy.revert(["frz"]).reverted == ["frz"]
    assert proxy.server.injected == [
        Injected(flow, False, b"c1", True),
        Injected(flow, True, b'{"serverContent": {"turnComplete": true}}', True),
        Injected(flow, False, b"\x00c2", False),
    ]
    # A stall holds no whole events, so there is nothing to wake.
    assert proxy.server.events == []


def test_stall_lets_control_frames_and_events_through(proxy: Proxy) -> None:
    """A stall lets pings and pongs pass both ways and holds no bytes or FINs whole."""
    flow = proxy.open_flow()
    proxy.apply("frz", "freeze", {"mode": "stall"})
    assert [proxy.state.allow_control(flow, to_client, frame)
            for to_client in (True, False) for frame in (PING, PONG)] == [True] * 4
    assert proxy.state.holds(flow, True) is False and proxy.state.holds(flow, False) is False


def test_stall_one_way_holds_only_that_way(proxy: Proxy) -> None:
    """`direction: to_server` holds what the client sends and lets the server's messages pass."""
    flow = proxy.open_flow()
    proxy.apply("frz", "freeze", {"mode": "stall", "direction": "to_server"})
    assert proxy.send(flow, b"up", from_client=True).dropped is True
    assert proxy.send(flow, b"down", from_client=False).dropped is False
    proxy.revert(None)
    assert proxy.server.injected == [Injected(flow, False, b"up", True)]


def test_network_holds_whole_events_and_control_frames(proxy: Proxy) -> None:
    """A network freeze holds everything arriving from either end whole and passes no ping or
    pong."""
    flow = proxy.open_flow()
    proxy.apply("frz", "freeze")
    assert proxy.state.holds(flow, True) is True and proxy.state.holds(flow, False) is True
    assert [proxy.state.allow_control(flow, to_client, frame)
            for to_client in (True, False) for frame in (PING, PONG)] == [False] * 4


def test_network_one_way_holds_only_that_way(proxy: Proxy) -> None:
    """`direction: to_server` holds what arrives from the client and stops control frames to the
    server only."""
    flow = proxy.open_flow()
    proxy.apply("frz", "freeze", {"direction": "to_server"})
    assert proxy.state.holds(flow, True) is True and proxy.state.holds(flow, False) is False
    assert proxy.state.allow_control(flow, False, PING) is False
    assert proxy.state.allow_control(flow, True, PONG) is True


def test_network_revert_wakes_each_frozen_flow(proxy: Proxy) -> None:
    """Reverting a network freeze delivers the messages it held and asks each flow it froze to
    replay its held events (internals.wake runs for real; only the server's inject_event is
    faked), not discarding them; a flow it did not freeze is not woken."""
    flow = proxy.open_flow()
    proxy.apply("frz", "freeze", {"connection": 1})
    proxy.open_flow()  # live, but not chosen: connection 2
    assert proxy.send(flow, b"parsed before the hold", from_client=False).dropped is True
    proxy.revert(None)
    assert proxy.server.injected == [Injected(flow, True, b"parsed before the hold", True)]
    (wake,) = proxy.server.events
    assert isinstance(wake, WakeInjected) and wake.flow is flow and wake.discard is False
    assert proxy.state.holds(flow, True) is False


def test_messages_of_a_flow_gone_meanwhile_are_not_delivered(proxy: Proxy) -> None:
    """What was held for a flow that ended during the freeze is not injected into it."""
    flow = proxy.open_flow()
    proxy.apply("frz", "freeze", {"mode": "stall"})
    proxy.send(flow, b"late", from_client=True)
    flow.live = False
    proxy.revert(None)
    assert proxy.server.injected == []


def test_an_armed_freeze_holds_the_message_that_triggered_it(proxy: Proxy) -> None:
    """Armed on the server's second toolCall with `forward: before`, the freeze engages inside the
    hook and holds that toolCall itself, but not the first."""
    flow = proxy.open_flow()
    match = FrameMatch.model_validate({"from": "server", "kind": "toolCall", "nth": 2,
                                       "forward": "before"})
    assert proxy.ask(Arm(steps=[ArmedStep(step="frz", fault="freeze", params={"mode": "stall"},
                                          match=match)])).ok
    first = proxy.send(flow, TOOL_CALL, from_client=False)
    second = proxy.send(flow, TOOL_CALL, from_client=False)
    assert (first.dropped, second.dropped) == (False, True)
    assert list(proxy.state.active) == ["frz"]
    assert [(e["event"], e["step"], e["trigger"], e["mode"]) for e in proxy.events()] == [
        ("fault.applied", "frz", "on frame tool_call", "stall")]


def test_the_run_asks_the_proxy() -> None:
    """The run's side of freeze is a request to the proxy, and so is its revert."""
    assert_run_side("freeze", {"mode": "stall"})


def test_it_lives_in_the_proxy_and_a_restore_reverts_it(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it,
    records it at the app layer, and a restore reverts it: messages pass again."""
    assert_lives_in_the_proxy(proxy, "freeze", {"mode": "stall"}, restore_reverts=True)
    (flow,) = proxy.state.flows
    assert proxy.send(flow, b"later", from_client=True).dropped is False
