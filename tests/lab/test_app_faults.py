"""Every app-level fault through the real mitmproxy, between a real client and a real server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from faultlab.events import Event
from faultlab.result import RunResult

from .helpers import failed, first, peers, run_profile

pytestmark = pytest.mark.lab


def step(step_id: str, do: str, after: str = "1s") -> str:
    """A timeline step `after` the client's first connection (the proxy delays the client's
    start by its own start-up, ~0.7 s)."""
    return f"  - {{id: {step_id}, when: {{connection: 1}}, after: {after}, do: {{{do}}}}}\n"


def run(runs_dir: Path, name: str, timeline: str, duration: str = "4s",
        extra: str = "") -> RunResult:
    text = f"name: {name}\n" + peers(duration, ", --log-messages" + extra) + "timeline:\n" + timeline
    result = run_profile(text, runs_dir)
    assert result.error is None, failed(result) + (result.run_dir / "proxy.log").read_text()
    return result


def events(result: RunResult, name: str, **where: object) -> list[Event]:
    return [e for e in result.observed if e.matches(name, where)]


def ticks(result: RunResult) -> list[tuple[int, float, float]]:
    """The server's ticks the client received: (number, sent, received), on the run clock."""
    t0 = first(result, "run.start").fields["unix_time"]
    out = []
    for e in events(result, "client.message"):
        if e.fields["text"].startswith('{"tick"'):
            tick = json.loads(e.fields["text"])
            out.append((tick["tick"], tick["ts"] - t0, e.t))
    return out


def test_abort_resets_both_ends(runs_dir: Path) -> None:
    """abort: each end sees an abnormal closure (1006), not mitmproxy's clean 1000."""
    result = run(runs_dir, "abort", step("cut", "fault: abort"))
    applied = first(result, "fault.applied", step="cut")
    assert applied.fields["reset"] == ["client", "server"]
    client = first(result, "client.closed")
    server = first(result, "server.closed")
    assert client.fields["code"] == 1006 and client.fields["by"] == "peer"
    assert server.fields["code"] == 1006 and server.fields["received_close"] is False
    assert applied.began <= min(client.t, server.t)  # the fault's doing, not an earlier end
    assert result.exit_codes["client"] == 2


def test_close_with_a_chosen_code_reaches_the_client(runs_dir: Path) -> None:
    """close to the client: it gets the code and reason; its echo closes the server side."""
    result = run(runs_dir, "close", step("bye", "fault: close, code: 4001, reason: maintenance, to: client"))
    client = first(result, "client.closed")
    assert client.fields["code"] == 4001 and client.fields["reason"] == "maintenance"
    assert client.fields["received_close"] is True
    server = first(result, "server.closed")
    assert server.fields["received_close"] is True
    assert first(result, "fault.applied", step="bye").began <= client.t


def test_network_freeze_looks_like_a_dead_path(runs_dir: Path) -> None:
    """freeze network: no message and no pong gets through; the client declares loss 2.0-2.5 s
    later while TCP stays up (no FIN, no RST); the server is never told."""
    result = run(runs_dir, "freeze-net", step("ice", "fault: freeze"))
    applied = first(result, "fault.applied", step="ice")
    lost = first(result, "client.lost")
    # The proxy acted between fired and applied: the client's rule (a ping unanswered for over
    # 2 s, and nothing heard either) declares loss no sooner than 2 s after that.
    assert lost.t - applied.began >= 2.0
    assert lost.fields["unanswered_s"] > 2.0 and lost.fields["silence_s"] > 2.0
    messages = events(result, "client.message")
    # Ticks and echoes flowed until the freeze (about 8 in its first second); no tick the server
    # sent once the freeze was in place came through.
    assert len([e for e in messages if e.t < applied.began]) >= 4
    assert [n for n, sent, _ in ticks(result) if sent > applied.t] == []
    assert not [e for e in events(result, "tcp.rst") if e.t < lost.t]
    assert not [e for e in events(result, "tcp.fin") if e.t < lost.t]
    assert not events(result, "server.closed")


def test_stall_holds_data_but_lets_pings_through_then_thaw_delivers(runs_dir: Path) -> None:
    """freeze stall: pongs still come, so the client does not declare loss; data is held, and
    thaw delivers it in order."""
    result = run(runs_dir, "stall", step("ice", "fault: freeze, mode: stall")
                 + "  - {id: sun, when: {step: ice}, after: 2s, do: {fault: thaw}}\n")
    assert not events(result, "client.lost")
    thaw = first(result, "fault.applied", step="sun")
    assert thaw.fields["held_messages"] > 10 and thaw.fields["thawed"] == ["ice"]
    ice = first(result, "fault.applied", step="ice").t
    # The held messages may arrive before the runner hears back from the proxy: count from the
    # moment the thaw was fired. Every tick sent while the freeze held arrived after that.
    thawed = thaw.began
    held = [received for _, sent, received in ticks(result) if ice < sent < thawed]
    assert len(held) >= 5 and min(held) >= thawed  # a tick every 200 ms
    # In order and complete: the client got ticks 1, 2, 3, ... with none missing.
    numbers = [n for n, _, _ in ticks(result)]
    assert numbers == list(range(1, len(numbers) + 1))
    assert result.exit_codes["client"] == 0


def test_thaw_can_discard(runs_dir: Path) -> None:
    """thaw discard: what the freeze held never arrives."""
    result = run(runs_dir, "discard", step("ice", "fault: freeze, mode: stall")
                 + "  - {id: sun, when: {step: ice}, after: 1s, do: {fault: thaw, discard: true}}\n",
                 duration="3s")
    thaw = first(result, "fault.applied", step="sun")
    assert thaw.fields["discarded"] is True and thaw.fields["held_messages"] > 0
    assert not [e for e in events(result, "proxy.frame", injected=True)]
    # The ticks sent during the freeze are one gap in what the client got; those after the thaw
    # arrive.
    numbers = [n for n, _, _ in ticks(result)]
    assert numbers == sorted(numbers)
    missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
    assert missing and missing == list(range(missing[0], missing[-1] + 1))
    assert len(missing) <= thaw.fields["held_messages"] and numbers[-1] > missing[-1]


def test_drop_message_to_the_server(runs_dir: Path) -> None:
    """drop_message to_server: the server echoes nothing more, ticks still reach the client."""
    result = run(runs_dir, "dropmsg", step("d", "fault: drop_message, direction: to_server"),
                 duration="3s")
    applied = first(result, "fault.applied", step="d")
    texts = [(e.t, e.fields["text"]) for e in events(result, "client.message")]
    assert [t for when, t in texts if when < applied.began and t.startswith("hello")]
    # The echoes stop for good: those the client got are of its first hellos, none missing, and
    # every later hello was dropped on its way.
    echoed = [int(t.split()[1]) for _, t in texts if t.startswith("hello")]
    assert echoed == list(range(1, len(echoed) + 1))
    assert len(events(result, "proxy.frame", dropped=True)) > 5
    assert [n for n, sent, _ in ticks(result) if sent > applied.t]  # the other way still flows


def test_delay_adds_latency_and_keeps_order(runs_dir: Path) -> None:
    """delay 300 ms to the client: messages arrive late but in order."""
    slow = step("slow", "fault: delay, direction: to_client, delay: 300ms, jitter: 50ms")
    result = run(runs_dir, "delay", slow, duration="3s")
    applied = first(result, "fault.applied", step="slow")
    got = ticks(result)
    # None lost, in order.
    assert [n for n, _, _ in got] == list(range(1, len(got) + 1))
    # Each tick's latency, from the server's send to the client's receipt: under the delay before
    # the proxy began delaying, at least 300 ms for every tick sent once it had. (That the delay
    # stays within delay + jitter is the fault's own rule: tests/faults/test_delay.py.)
    before = [received - sent for _, sent, received in got if received < applied.began]
    delayed = [received - sent for _, sent, received in got if sent > applied.t]
    assert len(before) >= 3 and min(before) < 0.3 - 1e-3
    assert len(delayed) >= 5
    assert all(d >= 0.3 - 1e-3 for d in delayed), delayed


def test_inject_a_message_to_the_client(runs_dir: Path) -> None:
    """inject: the client receives a message the server never sent."""
    inject = step("i", "fault: inject, to: client, message: {goAway: {timeLeft: 5s}}")
    result = run(runs_dir, "inject", inject, duration="2s")
    got = [e for e in events(result, "client.message") if "goAway" in e.fields["text"]]
    assert len(got) == 1
    (injected,) = events(result, "proxy.frame", injected=True)
    assert injected.fields["kind"] == "go_away" and injected.fields["from"] == "server"


def test_drop_pongs_makes_a_healthy_path_look_dead(runs_dir: Path) -> None:
    """drop_control pongs: data flows both ways, yet the client's keepalive declares loss."""
    result = run(runs_dir, "nopong", step("p", "fault: drop_control, frames: pongs"))
    applied = first(result, "fault.applied", step="p")
    lost = first(result, "client.lost")
    # The proxy acted between fired and applied: the client's rule (a ping unanswered for over
    # 2 s) declares loss no sooner than 2 s after that, though it hears the server all along.
    assert lost.t - applied.began >= 2.0
    assert lost.fields["unanswered_s"] > 2.0
    # Both ways until the verdict: the server's ticks, and its echoes of the client's messages.
    texts = [e.fields["text"] for e in events(result, "client.message")
             if applied.t < e.t < lost.t]
    assert [t for t in texts if t.startswith('{"tick"')] and [t for t in texts if t.startswith("hello")]


def test_toolcall_freeze_holds_exactly_the_trigger_and_what_follows(runs_dir: Path) -> None:
    """A freeze on the emulator's toolCall, applied before it is relayed: the server sent the
    toolCall and the end of the turn, the client received none of it (0 frames leak)."""
    client = Path(__file__).with_name("sdk_booking_client.py")
    text = f"""\
name: toolcall-freeze
target: {{emulator: {{time_scale: 0.1}}}}
client:
  command: [{sys.executable}, {client}, "2"]
  env: {{GOOGLE_API_KEY: not-a-real-key}}
timeline:
  - id: ice
    when: {{frame: {{from: server, kind: toolCall, forward: before}}}}
    do: {{fault: freeze}}
timeout: 30s
"""
    result = run_profile(text, runs_dir)
    assert result.error is None, failed(result) + (result.run_dir / "client.log").read_text()
    applied = first(result, "fault.applied", step="ice")
    assert applied.source == "proxy" and applied.fields["trigger"].startswith("on frame")
    sent = [e.fields["kind"] for e in result.observed
            if e.name == "emulator.frame" and e.fields.get("from") == "server"]
    assert "tool_call" in sent
    assert sent[sent.index("tool_call"):][:3] == [
        "tool_call", "server_content.generation_complete", "server_content.turn_complete"]
    # The client got everything sent before the toolCall (setupComplete went to connect())...
    received = [e.fields["kind"] for e in result.observed if e.name == "client.received"]
    assert len(received) == sent.index("tool_call") - 1
    assert "tool_call" not in received
    # ...and the proxy relayed nothing from the toolCall on: it held the toolCall itself and what
    # came in the same read; later bytes never even reached its message hook.
    down = [e for e in result.observed
            if e.name == "proxy.frame" and e.fields["from"] == "server"]
    first_held = next(i for i, e in enumerate(down) if e.fields["kind"] == "tool_call")
    assert all(e.fields.get("dropped") for e in down[first_held:])
