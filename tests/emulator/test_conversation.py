"""The sans-I/O core's conversation on a fake clock: turns in parts, nudges, turn order, usage,
models."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from faultlab.emulator.brain import CONTEXT_CHARS
from faultlab.emulator.outbox import Action
from faultlab.emulator.personality import PERSONALITIES, personality_with
from faultlab.emulator.session import Connection, Emulator
from faultlab.scenarios.booking.brain import booking_assistant

from .test_session import closes, frames, setup

DEV = PERSONALITIES["gemini-dev-2026-10"]
BOOKING = "Book me the 3pm slot tomorrow, please."
TOOLS = [{"functionDeclarations": [{"name": "book_slot", "behavior": "NON_BLOCKING"}]}]


def content(text: str | None, done: bool, role: str = "user") -> str:
    turns = [] if text is None else [{"role": role, "parts": [{"text": text}]}]
    return json.dumps({"clientContent": {"turns": turns, "turnComplete": done}})


def realtime_text(text: str) -> str:
    return json.dumps({"realtimeInput": {"text": text}})


def connected(em: Emulator, modalities: str = "TEXT", **extra: Any) -> Connection:
    conn = em.connect(0.0)
    conn.receive(setup(tools=TOOLS, generationConfig={"responseModalities": [modalities]},
                       **extra), 0.0)
    assert frames(conn.poll(1.0))[0] == {"setupComplete": {}}
    return conn


def server_content(actions: list[Action]) -> list[tuple[float, str]]:
    """(time, what) of every serverContent frame: `text`, `audio` or the flag it carries."""
    out = []
    for a in actions:
        sc = (a.frame or {}).get("serverContent")
        if sc is None:
            continue
        if "modelTurn" in sc:
            part = sc["modelTurn"]["parts"][0]
            out.append((a.at, "text" if "text" in part else "audio"))
        else:
            out.append((a.at, next(iter(sc))))
    return out


def spoken(actions: list[Action]) -> list[str]:
    return [a.frame["serverContent"]["modelTurn"]["parts"][0]["text"] for a in actions
            if a.frame and "text" in a.frame.get("serverContent", {}).get("modelTurn", {"parts": [{}]})
            ["parts"][0]]


def tool_calls(actions: list[Action]) -> list[dict[str, Any]]:
    return [c for a in actions if a.frame and "toolCall" in a.frame
            for c in a.frame["toolCall"]["functionCalls"]]


def answer_calls(conn: Connection, calls: list[dict[str, Any]], now: float) -> None:
    conn.receive(json.dumps({"toolResponse": {"functionResponses": [
        {"id": c["id"], "name": c["name"], "response": {"status": "committed"}} for c in calls]}}),
        now)


@pytest.mark.parametrize("parts", [
    [BOOKING, "."],  # LiveKit: the request, then a placeholder turn
    [BOOKING, None],  # ... or an empty one
    ["Book me the slot", "at 3pm tomorrow, please.", " "],  # a request in pieces
])
def test_a_request_in_parts_is_booked_once_and_confirmed_once(parts: list[str | None]) -> None:
    em = Emulator(DEV, seed=1, brain=booking_assistant())
    conn = connected(em)
    for i, part in enumerate(parts):
        conn.receive(content(part, done=i == len(parts) - 1), 1.0 + i * 0.1)
    out = conn.poll(5.0)
    (call,) = tool_calls(out)
    assert call["args"] == {"slot": "tomorrow at 3pm"}
    answer_calls(conn, [call], 5.0)
    out = conn.poll(10.0)
    assert spoken(out) == ["Done: your slot tomorrow at 3pm is booked."]


def test_a_whitespace_nudge_after_the_answer_gets_no_extra_turn() -> None:
    """pipecat on Gemini 3 sends realtimeInput.text " " to keep the model going."""
    em = Emulator(DEV, seed=2)
    conn = connected(em)
    conn.receive(content("Hello there", done=True), 1.0)
    conn.receive(realtime_text(" "), 1.1)  # while the answer is due
    first = conn.poll(5.0)
    assert spoken(first) == ["You said: Hello there"]
    conn.receive(realtime_text(" "), 5.0)  # after it
    conn.receive(content(".", done=True), 5.1)
    assert not conn.poll(10.0)


def test_a_nudge_gets_an_unanswered_request_answered() -> None:
    em = Emulator(DEV, seed=3)
    conn = connected(em)
    conn.receive(content("Hello there", done=False), 1.0)
    assert not conn.poll(3.0)
    conn.receive(realtime_text(" "), 3.0)
    out = conn.poll(5.0)
    assert spoken(out) == ["You said: Hello there"]
    assert 0.5 <= out[0].at - 3.0 <= 1.1


def test_realtime_text_waits_the_reply_latency() -> None:
    """T7's latency for every text path, not 0-48 ms."""
    em = Emulator(DEV, seed=4)
    conn = connected(em)
    for i in range(20):
        t = 10.0 * (i + 1)
        conn.receive(realtime_text(f"Hello number {i}"), t)
        out = conn.poll(t + 5)
        assert 0.5 <= out[0].at - t <= 1.1


@pytest.mark.parametrize("second", ["text", "content"])
def test_a_second_text_turn_interrupts_the_first_and_turns_never_overlap(second: str) -> None:
    """One turn at a time: the cut turn ends with interrupted + turnComplete before the next
    reply's first audio, and every turn's frames come in one block."""
    em = Emulator(DEV, seed=5)
    conn = connected(em, "AUDIO")
    conn.receive(realtime_text("tell me a long story about the sea and the ships on it"), 1.0)
    first = conn.poll(2.2)
    assert server_content(first)[0][1] == "audio"
    message = realtime_text("stop") if second == "text" else content("stop", done=True)
    conn.receive(message, 2.2)
    rest = conn.poll(30.0)
    flow = [what for _, what in server_content(first + rest)]
    cut = flow.index("interrupted")
    assert flow[cut + 1] == "turnComplete"
    assert "turnComplete" not in flow[:cut]  # the first turn had not ended
    tail = flow[cut + 2:]
    assert tail[0] == "audio" and tail[-1] == "turnComplete"
    assert tail.count("turnComplete") == 1 and "interrupted" not in tail


def test_text_turns_sent_while_the_answer_is_due_are_answered_together() -> None:
    """A turn sent before the answer to the previous one began joins it: one answer."""
    em = Emulator(DEV, seed=6, brain=booking_assistant())
    conn = connected(em)
    conn.receive(realtime_text("Hello"), 1.0)
    conn.receive(realtime_text("Book me the 3pm slot tomorrow, please."), 1.2)
    out = conn.poll(5.0)
    assert len(tool_calls(out)) == 1 and not spoken(out)
    assert 1.7 <= out[0].at <= 2.3


def test_usage_metadata_rides_on_turn_complete() -> None:
    em = Emulator(DEV, seed=7)
    conn = connected(em)
    conn.receive(content("Hello there", done=True), 1.0)
    out = frames(conn.poll(5.0))
    (done,) = [f for f in out if f.get("serverContent", {}).get("turnComplete")]
    assert set(done["usageMetadata"]) == {"promptTokenCount", "responseTokenCount", "totalTokenCount"}
    assert not [f for f in out if set(f) == {"usageMetadata"}]


def test_the_conversation_survives_a_resume() -> None:
    """The session's turns are restored with it: a request sent before a drop is answered by a
    nudge after the resume."""
    em = Emulator(DEV, seed=8, brain=booking_assistant())
    conn = em.connect(0.0)
    conn.receive(setup(tools=TOOLS), 0.0)
    handle = next(f["sessionResumptionUpdate"]["newHandle"] for f in frames(conn.poll(2.0))
                  if "sessionResumptionUpdate" in f)
    conn.receive(content(BOOKING, done=False), 2.0)
    conn.peer_closed(2.1)
    resumed = em.connect(20.0)
    resumed.receive(setup(handle, tools=TOOLS), 20.0)
    resumed.poll(21.0)
    resumed.receive(content(None, done=True), 21.0)
    assert tool_calls(resumed.poll(25.0))[0]["args"] == {"slot": "tomorrow at 3pm"}


@pytest.mark.parametrize(("model", "api", "reason"), [
    ("models/no-such-model-xyz", "developer",
     "models/no-such-model-xyz is not found for API version v1beta, or is not supported for "
     "bidiGenerateContent."),
    ("models/gemini-2.0-flash-live-001", "developer",
     "models/gemini-2.0-flash-live-001 is not found for API version v1beta, or is not supported "
     "for bidiGenerateContent."),
    ("projects/p/locations/us-central1/publishers/google/models/gemini-nope", "vertex",
     "Publisher Model `projects/p/locations/us-central1/publishers/google/models/gemini-nope` was"),
])
def test_unknown_and_retired_models_are_closed_1008(model: str, api: str, reason: str) -> None:
    em = Emulator(PERSONALITIES["vertex-2026" if api == "vertex" else "gemini-dev-2026-10"], seed=9)
    conn = em.connect(0.0, api=api)
    conn.receive(json.dumps({"setup": {"model": model}}), 0.0)
    out = conn.poll(1.0)
    assert not frames(out)
    ((code, why),) = closes(out)
    assert code == 1008 and why.startswith(reason[:123]) and len(why.encode()) <= 123


@pytest.mark.parametrize(("model", "modalities", "ok"), [
    ("models/gemini-3.8-live", ["TEXT"], True),
    ("models/gemini-live-2.5-flash-preview", ["TEXT"], True),
    ("models/gemini-2.5-flash-native-audio-preview-12-2025", ["AUDIO"], True),
    ("models/gemini-2.5-flash-native-audio-preview-12-2025", ["TEXT"], False),
    ("publishers/google/models/gemini-live-2.5-flash-native-audio", ["TEXT"], False),
])
def test_the_model_table_decides_the_modalities(model: str, modalities: list[str],
                                                ok: bool) -> None:
    em = Emulator(DEV, seed=10)
    conn = em.connect(0.0)
    conn.receive(json.dumps({"setup": {"model": model, "generationConfig": {
        "responseModalities": modalities}}}), 0.0)
    out = conn.poll(1.0)
    assert bool(frames(out)) is ok
    if not ok:
        assert closes(out)[0][0] == 1007


def test_a_personality_can_serve_other_models() -> None:
    custom = personality_with("gemini-dev-2026-10", {"models": [{"pattern": "my-model-*"}]})
    em = Emulator(custom, seed=11)
    ok, refused = em.connect(0.0), em.connect(0.0)
    ok.receive(json.dumps({"setup": {"model": "models/my-model-1"}}), 0.0)
    refused.receive(json.dumps({"setup": {"model": "models/gemini-3.8-live"}}), 0.0)
    assert frames(ok.poll(1.0)) and closes(refused.poll(1.0))[0][0] == 1008


@pytest.mark.parametrize(("default", "kept"), [("BLOCKING", False), ("NON_BLOCKING", True)])
def test_a_function_without_behavior_gets_the_models_default(default: str, kept: bool) -> None:
    """T5: an interruption drops a pending BLOCKING call; a NON_BLOCKING one survives it."""
    custom = personality_with("gemini-dev-2026-10", {"models": [
        {"pattern": "gemini-*", "default_behavior": default}]})
    em = Emulator(custom, seed=12, brain=booking_assistant())
    conn = em.connect(0.0)
    conn.receive(setup(tools=[{"functionDeclarations": [{"name": "book_slot"}]}],
                       generationConfig={"responseModalities": ["AUDIO"]},
                       outputAudioTranscription={}), 0.0)
    conn.poll(1.0)
    conn.receive(content("Tell me a long story about the sea and its ships", done=True), 1.0)
    conn.poll(2.5)  # the story plays
    conn.receive(content(BOOKING, done=True), 2.5)
    (call,) = tool_calls(conn.poll(5.0))
    conn.receive(content("And tell me another story about the mountains", done=True), 5.0)
    conn.poll(6.5)
    conn.receive(content("Stop, please.", done=True), 6.5)  # cuts the story: the call is pending
    answer_calls(conn, [call], 7.0)
    after = conn.poll(20.0)
    assert any("is booked" in text for text in spoken_text(after)) is kept


def spoken_text(actions: list[Action]) -> list[str]:
    return [a.frame["serverContent"]["outputTranscription"]["text"] for a in actions
            if a.frame and "outputTranscription" in a.frame.get("serverContent", {})]


def test_a_session_keeps_the_latest_context_chars_of_its_conversation() -> None:
    """Memory: past CONTEXT_CHARS the oldest turns are forgotten (an event says how much), a
    longer turn keeps its end, and the model still answers the latest words."""
    events: list[dict[str, Any]] = []
    em = Emulator(DEV, seed=2, emit=lambda name, **f: events.append({"event": name, **f}),
                  brain=booking_assistant())
    conn = connected(em)
    conn.receive(content("old words " * 30_000, False), 1.0)  # 300,000 characters
    conn.receive(content("x" * (CONTEXT_CHARS * 2) + " Did you book it?", True), 1.1)
    mind = conn.session.mind  # type: ignore[union-attr]
    assert [len(text) for _, text in mind.turns] == [CONTEXT_CHARS - len("user") - 3]
    assert mind.turns[0][1].endswith("x Did you book it?")
    assert sum(e["chars"] for e in events if e["event"] == "emulator.context_trimmed") == (
        300_000 + len("user") + 3 + CONTEXT_CHARS + len(" Did you book it?") + len("user") + 3)
    assert spoken(conn.poll(5.0)) == ["I haven't booked anything yet."]
    assert len(mind.context_text()) <= CONTEXT_CHARS


def test_a_long_turn_of_rule_words_is_answered_in_linear_time() -> None:
    """The rules' patterns have bounded gaps: half a MiB of "book ... " is answered at once (with
    `.*` between the words it took minutes), and the echo of the user's words stays short."""
    em = Emulator(DEV, seed=2)
    conn = connected(em)
    conn.receive(content("book book_slot " * 35_000, True), 1.0)
    started = time.process_time()  # CPU time: a busy machine does not stretch it
    (reply,) = spoken(conn.poll(5.0))
    assert time.process_time() - started < 2.0
    assert reply.startswith("You said: book book_slot") and len(reply) <= 140


def turn_blocks(actions: list[Action]) -> list[int]:
    """The model turn of every frame of a turn, in the order sent (0: not a turn's frame)."""
    return [a.turn for a in actions if a.frame is not None and a.turn]


def assert_one_turn_at_a_time(actions: list[Action]) -> None:
    """No turn's frames interleave with another's, and each ends with its turnComplete (or is
    cut: `interrupted` follows it)."""
    blocks = turn_blocks(actions)
    starts = [t for i, t in enumerate(blocks) if i == 0 or blocks[i - 1] != t]
    assert len(starts) == len(set(starts)), blocks
    sent = [a.frame for a in actions if a.frame is not None]
    for t in set(blocks):
        i = max(i for i, a in enumerate(a for a in actions if a.frame is not None) if a.turn == t)
        ended = sent[i].get("serverContent", {}).get("turnComplete")
        cut = i + 1 < len(sent) and sent[i + 1].get("serverContent", {}).get("interrupted")
        assert ended or cut, (t, sent[i])


def booking_pending(em: Emulator, modalities: str = "TEXT",
                    **extra: Any) -> tuple[Connection, dict[str, Any]]:
    """A session asked for the booking at 1 s, with its book_slot call made and unanswered."""
    conn = connected(em, modalities, **extra)
    conn.receive(content(BOOKING, done=True), 1.0)
    (call,) = tool_calls(conn.poll(3.0))
    return conn, call


def test_a_tool_result_is_spoken_after_the_turn_under_way() -> None:
    """R5 then T2: asked while the booking is pending, the model says it is in progress; the
    result that comes while it speaks is spoken after that turn, not inside it."""
    conn, call = booking_pending(Emulator(DEV, seed=13, brain=booking_assistant()), "AUDIO",
                                 outputAudioTranscription={})
    conn.receive(content("Did you book it?", done=True), 3.0)
    first = conn.poll(4.2)  # the in-progress sentence is playing
    assert spoken_text(first) == ["I'm booking it now; it's still in progress."]
    answer_calls(conn, [call], 4.2)
    rest = conn.poll(30.0)
    assert spoken_text(rest) == ["Done: your slot tomorrow at 3pm is booked."]
    assert_one_turn_at_a_time(first + rest)


def test_a_result_and_a_question_due_together_are_two_turns_in_order() -> None:
    """The result is spoken of first (T2), then the question is answered, as the next turn."""
    conn, call = booking_pending(Emulator(DEV, seed=14, brain=booking_assistant()))
    conn.receive(content("Did you book it?", done=True), 3.0)
    answer_calls(conn, [call], 3.01)
    out = conn.poll(10.0)
    assert spoken(out) == ["Done: your slot tomorrow at 3pm is booked.",
                           "Yes, your slot tomorrow at 3pm is booked."]
    assert_one_turn_at_a_time(out)


def test_parts_sent_after_a_turn_ended_wait_for_the_next_turn() -> None:
    """A turn ends with a question; a note sent right after with turnComplete false (a
    recovering client's status line) is not part of it: the question is answered, and the note
    waits for the next turn's end."""
    em = Emulator(DEV, seed=22, brain=booking_assistant())
    conn = connected(em)
    conn.receive(content("Hello there", done=True), 1.0)
    conn.receive(content("Book me the 3pm slot tomorrow, please.", done=False), 1.01)
    out = conn.poll(5.0)
    assert spoken(out) == ["You said: Hello there"] and not tool_calls(out)
    conn.receive(content(None, done=True), 5.0)
    assert tool_calls(conn.poll(10.0))[0]["args"] == {"slot": "tomorrow at 3pm"}


def test_a_result_while_a_turn_is_open_leaves_its_parts_unanswered() -> None:
    """A result spoken of while the user's parts wait for their turnComplete: those parts are
    still answered when it comes."""
    conn, call = booking_pending(Emulator(DEV, seed=15, brain=booking_assistant()))
    conn.receive(content("Hello there", done=False), 3.0)
    answer_calls(conn, [call], 3.0)
    assert spoken(conn.poll(6.0)) == ["Done: your slot tomorrow at 3pm is booked."]
    conn.receive(content(None, done=True), 6.0)
    assert spoken(conn.poll(10.0)) == ["You said: Hello there"]


def test_turn_complete_alone_after_parts_interrupts_like_words() -> None:
    """Parts with turnComplete false, then turnComplete alone while the model speaks: the turn
    has words, so the model's turn is cut and the parts are answered (T7), not ignored as a nudge."""
    em = Emulator(DEV, seed=16)
    conn = connected(em, "AUDIO", outputAudioTranscription={})
    conn.receive(content("Tell me a long story about the sea and its ships", done=True), 1.0)
    first = conn.poll(2.5)
    conn.receive(content("Hello there", done=False), 2.5)
    conn.receive(content(None, done=True), 2.5)
    rest = conn.poll(30.0)
    assert server_content(rest)[0][1] == "interrupted"
    assert spoken_text(rest) == ["You said: Hello there"]
    assert_one_turn_at_a_time(first + rest)


def test_speech_holds_back_an_answer_due_to_text() -> None:
    """Audio barge-in as for text: speech that starts while a text turn's answer is due puts the
    answer off to the end of the speech, and one turn answers both."""
    import base64

    import numpy as np

    em = Emulator(DEV, seed=17)
    conn = connected(em, realtimeInputConfig={"automaticActivityDetection": {"disabled": True}})
    conn.receive(realtime_text("Hello there"), 1.0)
    conn.receive(json.dumps({"realtimeInput": {"activityStart": {}}}), 1.1)
    tone = (np.sin(np.arange(16000) / 5) * 8000).astype("<i2").tobytes()
    conn.receive(json.dumps({"realtimeInput": {"audio": {
        "data": base64.b64encode(tone).decode(), "mimeType": "audio/pcm;rate=16000"}}}), 1.2)
    assert not conn.poll(3.0)  # the user is still speaking
    conn.receive(json.dumps({"realtimeInput": {"activityEnd": {}}}), 3.0)
    assert spoken(conn.poll(6.0)) == ["You said: Hello there [speech 1.0s]"]


def test_functions_declared_by_context_update_keep_their_behavior() -> None:
    """A NON_BLOCKING function declared in a contextUpdate survives an interruption (T5)."""
    em = Emulator(DEV, seed=18, brain=booking_assistant())
    conn = em.connect(0.0)
    conn.receive(setup(generationConfig={"responseModalities": ["AUDIO"]},
                       outputAudioTranscription={}), 0.0)
    conn.poll(1.0)
    conn.receive(json.dumps({"contextUpdate": {"tools": {"tools": [{"functionDeclarations": [
        {"name": "book_slot", "behavior": "NON_BLOCKING"}]}]}}}), 1.0)
    conn.receive(content(BOOKING, done=True), 1.0)
    (call,) = tool_calls(conn.poll(3.0))
    conn.receive(content("Tell me a long story about the sea and its ships", done=True), 3.0)
    conn.poll(4.5)
    conn.receive(content("Stop, please.", done=True), 4.5)
    answer_calls(conn, [call], 5.0)
    assert any("is booked" in text for text in spoken_text(conn.poll(20.0)))


@pytest.mark.parametrize(("words", "slot"), [
    ("Book me a slot today at 3pm, please.", "today at 3pm"),
    ("Book me the 4pm slot tomorrow.", "tomorrow at 4pm"),
])
def test_the_day_may_come_before_or_after_the_hour(words: str, slot: str) -> None:
    em = Emulator(DEV, seed=19, brain=booking_assistant())
    conn = connected(em)
    conn.receive(content(words, done=True), 1.0)
    assert tool_calls(conn.poll(3.0))[0]["args"] == {"slot": slot}


def test_a_model_reason_with_braces_is_quoted_as_written() -> None:
    custom = personality_with("gemini-dev-2026-10", {"unknown_model": "no {model} {here}"})
    em = Emulator(custom, seed=20)
    conn = em.connect(0.0)
    conn.receive(json.dumps({"setup": {"model": "models/nope"}}), 0.0)
    assert closes(conn.poll(1.0)) == [(1008, "no models/nope {here}")]


def test_a_long_status_line_is_not_read_back() -> None:
    """A status line's argument is read only up to 120 characters (the speech stays small)."""
    em = Emulator(DEV, seed=21)
    conn = connected(em)
    conn.receive(content(f"[status] book_slot({'x' * 5000}): committed", done=True), 1.0)
    (speech,) = spoken(conn.poll(5.0))
    assert len(speech) < 200
