"""delay: its parameters (durations with units), and how it holds each message and re-injects it
`delay` later, in order, toward the same peer."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from .conftest import assert_lives_in_the_proxy, assert_run_side, params_of, refusal
from .fake_proxy import Injected, Proxy

AUDIO = {"realtimeInput": {"audio": {"data": "AAAA", "mimeType": "audio/pcm;rate=16000"}}}
TURN_DONE = {"serverContent": {"turnComplete": True}}
# asyncio may run a timer up to its clock resolution early.
EARLY_S = 0.001
# The tests below wait past the delays with asyncio.sleep: the loop runs timers in the order they
# are due, so the delayed messages are out before the sleep ends, however busy the machine.


def test_delay_is_required_and_jitter_defaults_to_none() -> None:
    """`delay` must be given (in seconds from a duration), `jitter` defaults to 0 and `direction`
    to both."""
    assert params_of("delay", {"delay": "250ms"}).model_dump() == {
        "connection": None, "direction": "both", "delay": 0.25, "jitter": 0.0}
    assert params_of("delay", {"delay": "1s", "jitter": "100ms"}).model_dump()["jitter"] == 0.1


@pytest.mark.parametrize(("params", "refused"), [
    ({}, {"delay": "missing"}),
    ({"delay": 0.5}, {"delay": "value_error"}),
    ({"delay": "1s", "jitter": 0.1}, {"jitter": "value_error"}),
    ({"delay": "soon"}, {"delay": "value_error"}),
    ({"delay": "1s", "direction": "upstream"}, {"direction": "literal_error"}),
    ({"delay": "1s", "delay_ms": 5}, {"delay_ms": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """A missing delay, a bare number or a word for a duration, a direction out of its choices or
    an unknown field is refused naming the field."""
    assert refusal("delay", params) == refused


def test_the_proxy_reads_durations_as_the_run_sent_them(proxy: Proxy) -> None:
    """The durations reach the proxy as written (`30ms`) and come back in seconds in the details."""
    proxy.open_flow()
    reply = proxy.apply("lag", "delay", {"delay": "30ms", "jitter": "0s", "direction": "to_client"})
    assert reply.ok is True
    assert reply.details == {"direction": "to_client", "delay_s": 0.03, "jitter_s": 0.0}
    assert list(proxy.state.active) == ["lag"]


def test_each_message_is_relayed_late_in_order(proxy: Proxy) -> None:
    """Every message is dropped as it arrives and re-injected toward its peer `delay` later, in
    the order sent, text and binary alike."""
    flow = proxy.open_flow()
    delay_s = 0.03

    async def go() -> list[float]:
        proxy.apply("lag", "delay", {"delay": "30ms"})
        sent_at = []
        for content, from_client, binary in ((b"one", True, False), (b"two", False, False),
                                             (b"\x00\x01", True, True)):
            sent_at.append(time.monotonic())
            assert proxy.send(flow, content, from_client=from_client, binary=binary).dropped
        assert proxy.server.injected == []
        await asyncio.sleep(delay_s + 0.2)
        return sent_at

    sent_at = asyncio.run(go())
    assert proxy.server.injected == [Injected(flow, False, b"one", True),
                                     Injected(flow, True, b"two", True),
                                     Injected(flow, False, b"\x00\x01", False)]
    for sent, injected in zip(sent_at, proxy.server.injected_at, strict=True):
        assert injected - sent >= delay_s - EARLY_S


def test_each_message_is_held_delay_plus_at_most_jitter(proxy: Proxy) -> None:
    """Every message's release is set `delay` plus a draw from [0, jitter] after it arrives (one
    microsecond more per message queued ahead of it, to keep the order)."""
    flow = proxy.open_flow()

    async def go() -> list[float]:
        loop = asyncio.get_running_loop()
        held: list[float] = []
        call_at = loop.call_at

        def release_at(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
            if not kwargs:  # the fault's releases (the loop's own timers pass a context)
                held.append(when - loop.time())  # read after the fault's: never over its hold
            return call_at(when, *args, **kwargs)

        loop.call_at = release_at  # type: ignore[method-assign, assignment]
        proxy.apply("lag", "delay", {"delay": "300ms", "jitter": "50ms"})
        for i in range(20):
            proxy.send(flow, str(i).encode(), from_client=bool(i % 2))
        await asyncio.sleep(0.35 + 0.1)
        return held

    held = asyncio.run(go())
    assert len(held) == 20
    assert all(h <= 0.3 + 0.05 + 20 * 1e-6 for h in held), held
    assert len(proxy.server.injected) == 20


def test_only_its_direction_is_delayed(proxy: Proxy) -> None:
    """`direction: to_client` delays what the server sends; the client's messages pass at once."""
    flow = proxy.open_flow()

    async def go() -> list[bool]:
        proxy.apply("lag", "delay", {"delay": "10ms", "direction": "to_client"})
        dropped = [proxy.send(flow, AUDIO, from_client=True).dropped,
                   proxy.send(flow, TURN_DONE, from_client=False).dropped]
        await asyncio.sleep(0.1)
        return dropped

    assert asyncio.run(go()) == [False, True]
    assert [(i.to_client, i.content) for i in proxy.server.injected] == [
        (True, b'{"serverContent": {"turnComplete": true}}')]


def test_injected_messages_are_not_delayed_again(proxy: Proxy) -> None:
    """A message the proxy injected itself (such as a delayed one coming back) passes untouched."""
    flow = proxy.open_flow()

    async def go() -> bool:
        proxy.apply("lag", "delay", {"delay": "10ms"})
        dropped = proxy.send(flow, b"again", from_client=True, injected=True).dropped
        await asyncio.sleep(0.05)
        return dropped

    assert asyncio.run(go()) is False
    assert proxy.server.injected == []


def test_after_revert_messages_pass(proxy: Proxy) -> None:
    """Once reverted, delay no longer holds messages."""
    flow = proxy.open_flow()

    async def go() -> bool:
        proxy.apply("lag", "delay", {"delay": "10ms"})
        assert proxy.revert(["lag"]).reverted == ["lag"]
        return proxy.send(flow, b"now", from_client=True).dropped

    assert asyncio.run(go()) is False
    assert proxy.state.active == {}


def test_jitter_never_reorders(proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """With jitter, messages of one way still arrive in the order sent, even when a later
    message's random delay is shorter than the one before it."""
    flow = proxy.open_flow()
    # The first message draws the most jitter, every later one none: all release together.
    draws = iter([0.05] + [0.0] * 7)
    monkeypatch.setattr(random, "uniform", lambda a, b: next(draws))

    async def go() -> None:
        proxy.apply("lag", "delay", {"delay": "0ms", "jitter": "50ms"})
        for i in range(8):
            proxy.send(flow, str(i).encode(), from_client=True)
        await asyncio.sleep(0.05 + 0.2)

    asyncio.run(go())
    assert [i.content for i in proxy.server.injected] == [str(i).encode() for i in range(8)]


def test_a_message_dropped_by_another_fault_stays_dropped(proxy: Proxy) -> None:
    """A message drop_message swallowed is not brought back late by a delay applied after it."""
    flow = proxy.open_flow()

    async def go() -> None:
        proxy.apply("mute", "drop_message", {"count": 1})
        proxy.apply("lag", "delay", {"delay": "10ms"})
        proxy.send(flow, b"gone", from_client=True)
        await asyncio.sleep(0.1)

    asyncio.run(go())
    assert proxy.server.injected == []


def test_the_run_asks_the_proxy() -> None:
    """The run's side of delay is a request to the proxy, and so is its revert."""
    assert_run_side("delay", {"delay": "100ms"})


def test_it_lives_in_the_proxy_and_a_restore_reverts_it(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it,
    records it at the app layer, and a restore reverts it: messages are no longer held."""
    assert_lives_in_the_proxy(proxy, "delay", {"delay": "10ms"}, restore_reverts=True)
    (flow,) = proxy.state.flows
    assert proxy.send(flow, b"now", from_client=True).dropped is False
