"""drop_message: its parameters, how the proxy engages it over its control channel, which
messages it drops (kind, direction, `count`), and its revert."""

from __future__ import annotations

import asyncio
import time

import pytest

from faultlab.faults.drop_message import DropMessage
from faultlab.frames import FrameMatch
from faultlab.protocols import OPENAI
from faultlab.proxy.control import Arm, ArmedStep

from .conftest import ENGAGE_MS, assert_lives_in_the_proxy, assert_run_side, params_of, refusal, slow_engage
from .fake_proxy import Proxy

TOOL_CALL = {"toolCall": {"functionCalls": [{"id": "c1", "name": "book", "args": {}}]}}
TURN_DONE = {"serverContent": {"turnComplete": True}}
AUDIO = {"realtimeInput": {"audio": {"data": "AAAA", "mimeType": "audio/pcm;rate=16000"}}}


def test_defaults_drop_every_message_both_ways() -> None:
    """With no parameters every data message, either way, is dropped while applied."""
    assert params_of("drop_message").model_dump() == {"connection": None, "direction": "both",
                                                      "kind": None, "count": None}


@pytest.mark.parametrize(("params", "refused"), [
    ({"count": 0}, {"count": "greater_than_equal"}),
    ({"count": "two"}, {"count": "int_parsing"}),
    ({"direction": "up"}, {"direction": "literal_error"}),
    ({"kinds": ["toolCall"]}, {"kinds": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """A count below one, a direction out of its choices or an unknown field is refused."""
    assert refusal("drop_message", params) == refused


def test_an_apply_engages_it_in_the_proxy(proxy: Proxy) -> None:
    """An apply request engages the fault for the step, on the live flows, and replies with its
    details."""
    flow = proxy.open_flow()
    reply = proxy.apply("mute", "drop_message", {"kind": "toolCall"})
    assert reply.ok is True and reply.error is None
    assert reply.details == {"direction": "both", "kind": "toolCall"}
    assert list(proxy.state.active) == ["mute"]
    assert proxy.state.active["mute"].chosen == [flow]


def test_a_bad_parameter_is_a_refusal_naming_the_field(proxy: Proxy) -> None:
    """A parameter the fault's model refuses makes the proxy refuse the request, naming the field;
    nothing is engaged."""
    reply = proxy.apply("mute", "drop_message", {"count": 0})
    assert reply.ok is False
    assert reply.error is not None and "DropMessageParams\ncount\n" in reply.error
    assert proxy.state.active == {}


def test_an_unknown_fault_is_a_refusal(proxy: Proxy) -> None:
    """A fault name the proxy does not know is refused with that name."""
    reply = proxy.apply("mute", "drop_messages")
    assert reply.ok is False
    assert reply.error == "ValueError(\"unknown fault 'drop_messages'\")"
    assert proxy.state.active == {}


def test_a_packet_fault_is_refused_by_the_proxy(proxy: Proxy) -> None:
    """The proxy engages only app faults: asked for a drop, it refuses."""
    reply = proxy.apply("cut", "drop")
    assert reply.ok is False
    assert reply.error == "ValueError('drop is not a fault the proxy applies')"


def test_it_drops_only_the_matching_kind(proxy: Proxy) -> None:
    """`kind: toolCall` drops tool calls and lets every other message through."""
    flow = proxy.open_flow()
    proxy.apply("mute", "drop_message", {"kind": "toolCall"})
    assert proxy.send(flow, TOOL_CALL, from_client=False).dropped is True
    assert proxy.send(flow, TURN_DONE, from_client=False).dropped is False
    assert proxy.send(flow, AUDIO, from_client=True).dropped is False
    assert proxy.send(flow, b"not json", from_client=False).dropped is False
    assert proxy.server.injected == []


@pytest.mark.parametrize(("direction", "dropped_from_client", "dropped_from_server"), [
    ("to_server", True, False),
    ("to_client", False, True),
    ("both", True, True),
])
def test_it_drops_only_its_direction(proxy: Proxy, direction: str, dropped_from_client: bool,
                                     dropped_from_server: bool) -> None:
    """`direction` picks the way: to_server drops what the client sends, to_client what the
    server sends."""
    flow = proxy.open_flow()
    proxy.apply("mute", "drop_message", {"direction": direction})
    assert proxy.send(flow, AUDIO, from_client=True).dropped is dropped_from_client
    assert proxy.send(flow, TURN_DONE, from_client=False).dropped is dropped_from_server


def test_count_drops_only_the_next_n_matching(proxy: Proxy) -> None:
    """`count: 2` drops the next two matching messages only; others do not use up the count."""
    flow = proxy.open_flow()
    proxy.apply("mute", "drop_message", {"kind": "toolCall", "count": 2})
    sent = [proxy.send(flow, TOOL_CALL, from_client=False),
            proxy.send(flow, TURN_DONE, from_client=False),
            proxy.send(flow, TOOL_CALL, from_client=False),
            proxy.send(flow, TOOL_CALL, from_client=False)]
    assert [m.dropped for m in sent] == [True, False, True, False]


def test_only_the_chosen_connection_is_hurt(proxy: Proxy) -> None:
    """`connection: 2` drops messages of the second connection's flow only."""
    first, second = proxy.open_flow(), proxy.open_flow()
    proxy.apply("mute", "drop_message", {"connection": 2})
    assert proxy.send(first, TURN_DONE, from_client=False).dropped is False
    assert proxy.send(second, TURN_DONE, from_client=False).dropped is True


def test_flows_opened_later_are_not_hurt(proxy: Proxy) -> None:
    """Without `connection`, only the flows live when it was applied are hurt (not a resume's)."""
    before = proxy.open_flow()
    proxy.apply("mute", "drop_message")
    after = proxy.open_flow()
    assert proxy.send(before, TURN_DONE, from_client=False).dropped is True
    assert proxy.send(after, TURN_DONE, from_client=False).dropped is False


def test_revert_all_disengages_the_latest_first(proxy: Proxy) -> None:
    """A revert with no steps disengages every engaged fault, the latest first, and returns
    their ids; messages then pass."""
    flow = proxy.open_flow()
    for step in ("a", "b", "c"):
        assert proxy.apply(step, "drop_message").ok
    reply = proxy.revert(None)
    assert reply.ok is True and reply.reverted == ["c", "b", "a"]
    assert proxy.state.active == {}
    assert proxy.send(flow, TURN_DONE, from_client=False).dropped is False


def test_revert_by_step_disengages_just_that_one(proxy: Proxy) -> None:
    """A revert naming one step disengages that fault only; unknown ids are ignored."""
    flow = proxy.open_flow()
    proxy.apply("calls", "drop_message", {"kind": "toolCall"})
    proxy.apply("turns", "drop_message", {"kind": "serverContent.turnComplete"})
    assert proxy.revert(["calls", "nope"]).reverted == ["calls"]
    assert list(proxy.state.active) == ["turns"]
    assert proxy.send(flow, TOOL_CALL, from_client=False).dropped is False
    assert proxy.send(flow, TURN_DONE, from_client=False).dropped is True


def test_an_armed_step_fires_on_the_nth_match_before_relaying_it(
        proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """Armed on the server's second toolCall with `forward: before`, the step fires inside the
    message hook, so that second toolCall is the first one dropped; `fault.applied` is written to
    the proxy's events, its `applied_in_ms` the time the fault took to engage (made 20 ms here)."""
    slow_engage(monkeypatch, DropMessage)
    flow = proxy.open_flow()
    match = FrameMatch.model_validate({"from": "server", "kind": "toolCall", "nth": 2,
                                       "forward": "before"})
    reply = proxy.ask(Arm(steps=[ArmedStep(step="mute", fault="drop_message",
                                           params={"count": 1}, match=match, after_s=0)]))
    assert reply.ok is True
    started = time.perf_counter()
    sent = [proxy.send(flow, TOOL_CALL, from_client=True),  # from the client: does not count
            proxy.send(flow, TOOL_CALL, from_client=False),
            proxy.send(flow, TURN_DONE, from_client=False),
            proxy.send(flow, TOOL_CALL, from_client=False),
            proxy.send(flow, TOOL_CALL, from_client=False)]
    sending_ms = (time.perf_counter() - started) * 1000
    assert [m.dropped for m in sent] == [False, False, False, True, False]
    (applied,) = proxy.events()
    assert ENGAGE_MS <= applied.pop("applied_in_ms") <= sending_ms
    assert applied == {"event": "fault.applied", "step": "mute", "fault": "drop_message",
                       "layer": "app", "trigger": "on frame tool_call", "direction": "both",
                       "kind": None}


def test_an_armed_step_after_the_message_spares_it(proxy: Proxy) -> None:
    """With `forward: after` the step fires once the hook has returned: the matching message is
    relayed and the next one is dropped."""
    flow = proxy.open_flow()
    match = FrameMatch.model_validate({"from": "server", "kind": "toolCall"})

    async def go() -> list[bool]:
        proxy.ask(Arm(steps=[ArmedStep(step="mute", fault="drop_message", params={},
                                       match=match)]))
        first = proxy.send(flow, TOOL_CALL, from_client=False)
        assert proxy.state.active == {}
        await asyncio.sleep(0.01)
        return [first.dropped, proxy.send(flow, TURN_DONE, from_client=False).dropped]

    assert asyncio.run(go()) == [False, True]


def test_arming_bad_parameters_is_a_refusal(proxy: Proxy) -> None:
    """An armed step's parameters are checked when it is armed, not when it fires."""
    match = FrameMatch.model_validate({"kind": "toolCall"})
    reply = proxy.ask(Arm(steps=[ArmedStep(step="mute", fault="drop_message",
                                           params={"count": 0}, match=match)]))
    assert reply.ok is False and reply.error is not None and "count" in reply.error
    assert proxy.state.armed == []


def test_the_run_asks_the_proxy() -> None:
    """The run's side of drop_message is a request to the proxy, and so is its revert."""
    assert_run_side("drop_message", {"kind": "toolCall", "count": 1})


def test_it_lives_in_the_proxy_and_a_restore_reverts_it(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it,
    records it at the app layer, and a restore reverts it: messages pass again."""
    assert_lives_in_the_proxy(proxy, "drop_message", restore_reverts=True)
    (flow,) = proxy.state.flows
    assert proxy.send(flow, TURN_DONE, from_client=False).dropped is False


def test_an_apply_writes_no_event_of_its_own(proxy: Proxy) -> None:
    """A fault engaged over the control channel is recorded by the run, not by the proxy."""
    proxy.apply("mute", "drop_message")
    assert proxy.events() == []


def test_over_openai_realtime_kinds_are_its_own(proxy: Proxy) -> None:
    """With the run's protocol OpenAI Realtime, the proxy names messages by their `type`: a step
    armed on the second finished function call fires on it, and `kind:
    response.output_audio` drops the model's audio deltas in either protocol version's name,
    nothing else."""
    proxy.state.protocol = OPENAI
    flow = proxy.open_flow()
    call = {"type": "response.function_call_arguments.done", "call_id": "c1", "name": "book",
            "arguments": "{}"}
    match = FrameMatch.model_validate({"from": "server", "forward": "before", "nth": 2,
                                       "kind": "response.function_call_arguments"})
    assert proxy.ask(Arm(steps=[ArmedStep(step="mute", fault="drop_message",
                                          params={"kind": "response.output_audio"},
                                          match=match, after_s=0)])).ok
    audio = {"type": "response.output_audio.delta", "delta": "AAAA"}
    beta_audio = {"type": "response.audio.delta", "delta": "AAAA"}
    transcript = {"type": "response.output_audio_transcript.delta", "delta": "Hi"}
    before = [proxy.send(flow, m, from_client=False) for m in (call, audio, call)]
    assert [m.dropped for m in before] == [False, False, False]
    (applied,) = proxy.events()
    assert applied["trigger"] == "on frame response.function_call_arguments.done"
    after = [proxy.send(flow, m, from_client=False) for m in (audio, beta_audio, transcript)]
    assert [m.dropped for m in after] == [True, True, False]
