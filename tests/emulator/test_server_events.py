"""The server's events: every event the emulator's core and a cassette's replay write is a record
of faultlab.vocabulary.server (or a frame), read back with the very fields written; and the
replay opens, closes and ends its connections with the emulator's own records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faultlab.cassette.format import Cassette, Ending, Recorded, Said
from faultlab.cassette.replay import Replay
from faultlab.emulator.personality import PERSONALITIES, personality_with
from faultlab.emulator.session import Emulator
from faultlab.events import Event, EventBus, RunClock, read_events
from faultlab.scenarios.booking.brain import booking_assistant
from faultlab.vocabulary import Record, server
from faultlab.vocabulary.run import FrameLogged
from faultlab.vocabulary.schema import problems_of

RECORDS: dict[str, type[Record]] = {
    cls.NAME: cls for cls in (getattr(server, name) for name in server.__all__) if isinstance(cls, type)}
Told = list[tuple[str, dict[str, Any]]]
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = {"model": "models/gemini-3.8-live", "generationConfig": {"responseModalities": ["TEXT"]},
         "tools": [{"functionDeclarations": [{"name": "book_slot"}]}]}


def setup(handle: str | None = None) -> str:
    return json.dumps({"setup": {**SETUP, "sessionResumption": {"handle": handle} if handle else {}}})


def say(text: str) -> str:
    return json.dumps({"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}],
                                         "turnComplete": True}})


def unread(told: Told) -> list[tuple[str, dict[str, Any]]]:
    """The events told that no record reads back with the same fields, or that `faultlab events
    check` would hold to be of another shape than their record's schema says."""
    left = []
    for name, fields in told:
        event = Event(0.0, "target", name, fields)
        if FrameLogged.read(event) is not None:
            continue
        record = RECORDS[name].read(event) if name in RECORDS else None
        line = json.dumps({"event": name, **fields})
        if record is None or record.fields() != fields or list(problems_of(line)):
            left.append((name, fields))
    return left


def test_every_event_a_gemini_session_writes_is_a_server_record() -> None:
    """A session, its tool call and answer, a refused and an accepted resume, an unknown handle,
    a bad frame, a TCP that gave up and forgotten handles all write records read back whole."""
    told: Told = []
    em = Emulator(PERSONALITIES["gemini-dev-2026-10"], seed=1, brain=booking_assistant(),
                  emit=lambda name, /, **f: told.append((name, f)))
    conn = em.connect(0.0, client_port=40000)
    conn.receive(setup(), 0.0)
    out = conn.poll(1.0)
    (handle,) = [a.frame["sessionResumptionUpdate"]["newHandle"] for a in out
                 if a.frame and "sessionResumptionUpdate" in a.frame]
    conn.receive(say("Book me the 3pm slot tomorrow, please."), 1.0)
    for action in conn.poll(5.0):
        if action.frame and "toolCall" in action.frame:
            (call,) = action.frame["toolCall"]["functionCalls"]
            conn.receive(json.dumps({"toolResponse": {"functionResponses": [
                {"id": call["id"], "name": "book_slot", "response": {"status": "committed"}}]}}),
                5.0)
    conn.poll(10.0)
    locked = em.connect(10.0)
    locked.receive(setup(handle), 10.0)
    locked.poll(12.0)
    conn.peer_closed(12.0, timed_out=True)
    unknown = em.connect(12.0)
    unknown.receive(setup("no-such-handle"), 12.0)
    unknown.poll(14.0)
    bad = em.connect(14.0)
    bad.receive("{", 14.0)
    bad.poll(15.0)
    bad.peer_closed(15.0)
    em.poll(10_000.0)
    dead = em.connect(10_000.0)
    dead.receive(setup(handle), 10_000.0)
    dead.poll(10_002.0)
    names = {name for name, _ in told}
    assert {"emulator.connect", "emulator.close", "emulator.disconnect", "emulator.answer",
            "emulator.tool_response", "emulator.resume_refused", "emulator.tcp_gave_up",
            "emulator.release", "emulator.forgot"} <= names, names
    assert [f for n, f in told if n == "emulator.resume_refused" and "session" not in f]
    assert unread(told) == []


def test_every_event_an_openai_session_writes_is_a_server_record() -> None:
    """OpenAI's in-band error and its session's events are records read back whole too."""
    told: Told = []
    em = Emulator(personality_with("openai-realtime", {}), seed=1, brain=booking_assistant(),
                  emit=lambda name, /, **f: told.append((name, f)))
    conn = em.connect(0.0, "realtime")
    conn.begin("/v1/realtime?model=gpt-realtime", {}, 0.0)
    conn.receive(json.dumps({"type": "response.cancel"}), 1.0)
    conn.receive(json.dumps({"type": "conversation.item.create", "item": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}}),
        1.0)
    conn.receive(json.dumps({"type": "response.create"}), 1.0)
    conn.poll(5.0)
    conn.peer_closed(5.0)
    assert {"emulator.error", "emulator.answer"} <= {name for name, _ in told}
    assert unread(told) == []


def replayed(divergence: str) -> tuple[Replay, Told]:
    recorded = Recorded(1, 0.0, PATH, said=[
        Said(0.0, "client", "setup", setup(), n=1),
        Said(0.3, "server", "setup_complete", json.dumps({"setupComplete": {}}), after=1)],
        ending=Ending(1.0, 1011, "Internal error encountered.", "server", 1))
    told: Told = []
    em = Emulator(PERSONALITIES["gemini-dev-2026-10"], seed=1,
                  emit=lambda name, /, **f: told.append((name, f)))
    return Replay(Cassette("gemini", "test", [recorded]), em, divergence), told  # type: ignore[arg-type]


def test_a_replayed_connection_is_told_as_an_emulated_one() -> None:
    """A replay writes the emulator's connect, close and disconnect, then its own play."""
    replay, told = replayed("strict")
    conn = replay.connect(0.0, "developer", client_port=40000)
    conn.begin(PATH, {}, 0.0)
    conn.receive(setup(), 0.0)
    assert [a.code for a in conn.poll(2.0) if a.closes] == [1011]
    conn.peer_closed(2.0)
    conn.peer_closed(2.1)  # told once
    assert [(n, f) for n, f in told if n != "emulator.frame"] == [
        ("emulator.connect", {"conn": 1, "api": "developer", "client_port": 40000}),
        ("cassette.play", {"conn": 1, "recorded": 1}),
        ("emulator.close", {"conn": 1, "code": 1011, "reason": "Internal error encountered.",
                            "why": "recorded"}),
        ("emulator.disconnect", {"conn": 1})]
    assert unread(told) == []


def test_a_diverged_connection_is_closed_through_the_same_lifecycle() -> None:
    """Under strict a divergence is a close of the shared lifecycle: told once, when sent."""
    replay, told = replayed("strict")
    conn = replay.connect(0.0, "developer")
    conn.begin(PATH, {}, 0.0)
    conn.receive(say("Hi"), 0.0)
    assert conn.closing and not conn.closed
    (close,) = conn.poll(0.0)
    assert close.closes and conn.closed and conn.next_due() is None
    diverged = [f for n, f in told if n == "cassette.diverged"]
    closes = [f for n, f in told if n == "emulator.close"]
    assert [f["then"] for f in diverged] == ["strict"]
    assert [f["why"] for f in closes] == ["cassette diverged"]
    assert unread(told) == []


@pytest.mark.parametrize("record", [
    server.EmulatorAnswer(1, 1, 0, [], None), server.CassetteDiverged(1, None, "x", "y", "strict"),
    server.EchoClosed(2, None, "", False, 0), server.EmulatorRefused("bad line"),
    server.ServerClose(1, 1007, "cut", "bad client message", {"detail": "the whole message"}),
    server.EmulatorToolResponse(1, "call-1", "book_slot"), server.ServerDisconnect.of(3, True),
], ids=lambda r: r.name)
def test_a_field_written_as_null_reads_back_as_itself(record: Record, tmp_path: Path) -> None:
    """Fields the JSONL has always carried (a null speech, recorded connection or status, a
    close's detail, a tool's `name`) go through the bus and back unchanged."""
    bus = EventBus(RunClock(), tmp_path / "events.jsonl")
    bus.announce("target", record)
    bus.close()
    (event,) = read_events(tmp_path / "events.jsonl")
    assert type(record).read(event) == record and dict(event.fields) == record.fields()
    assert set(event.fields) >= type(record).ALWAYS  # written, null or not
    assert list(problems_of(json.dumps({"event": event.name, **event.fields}))) == []
