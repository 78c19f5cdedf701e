"""OpenAI Realtime in the sans-I/O core, on a fake clock: the session opens with the connection,
errors are told in-band and leave it open, responses carry their items, function outputs wait
for response.create, server VAD and manual commits end a user turn, response.cancel and barge-in
cancel, the session cap ends it; Gemini's own tests show the seam left Gemini's frames as they were."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from faultlab.emulator.audio import TranscriptRegistry
from faultlab.emulator.outbox import Action
from faultlab.emulator.personality import PERSONALITIES, personality_with
from faultlab.emulator.session import Connection, Emulator
from faultlab.scenarios.booking.brain import booking_assistant
from faultlab.speech import synthesise

OPENAI = PERSONALITIES["openai-realtime"]
PATH = "/v1/realtime?model=gpt-realtime"
BOOK_TOOL = {"type": "function", "name": "book_slot", "description": "Book a slot.",
             "parameters": {"type": "object", "properties": {"time": {"type": "string"}}}}


def emulator(**changes: Any) -> Emulator:
    return Emulator(personality_with("openai-realtime", changes), brain=booking_assistant(),
                    seed=1, registry=TranscriptRegistry())


def opened(em: Emulator, path: str = PATH, **headers: str) -> Connection:
    conn = em.connect(0.0, "realtime")
    conn.begin(path, headers, 0.0)
    return conn


def events(actions: list[Action]) -> list[dict[str, Any]]:
    return [a.frame for a in actions if a.frame is not None]


def kinds(actions: list[Action]) -> list[str]:
    return [f["type"] for f in events(actions)]


def send(conn: Connection, now: float, kind: str, **fields: Any) -> None:
    conn.receive(json.dumps({"type": kind, **fields}), now)


def user_text(conn: Connection, now: float, text: str) -> None:
    send(conn, now, "conversation.item.create", item={
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})


def text_session(conn: Connection, now: float) -> None:
    send(conn, now, "session.update", session={
        "type": "realtime", "output_modalities": ["text"], "instructions": "Be brief.",
        "tools": [BOOK_TOOL]})


def test_the_session_opens_with_the_connection_and_says_so_first() -> None:
    conn = opened(emulator())
    first = events(conn.poll(1.0))
    assert [f["type"] for f in first] == ["session.created"]
    session = first[0]["session"]
    assert session["model"] == "gpt-realtime" and session["type"] == "realtime"
    assert session["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    assert session["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert first[0]["event_id"].startswith("event_") and session["id"].startswith("sess_")


def test_an_unknown_model_is_refused_with_an_error_and_a_close_4000() -> None:
    conn = opened(emulator(), "/v1/realtime?model=gpt-nonexistent")
    actions = conn.poll(1.0)
    (error,) = events(actions)
    assert error["error"]["code"] == "model_not_found"
    assert "gpt-nonexistent" in error["error"]["message"]
    close = actions[-1]
    assert (close.frame, close.code, close.reason) == (
        None, 4000, "invalid_request_error.model_not_found")


def test_the_beta_header_is_refused_as_the_retired_beta() -> None:
    conn = opened(emulator(), **{"openai-beta": "realtime=v1"})
    actions = conn.poll(1.0)
    (error,) = events(actions)
    assert error["error"]["code"] == "beta_api_shape_disabled"
    assert (actions[-1].code, actions[-1].reason) == (
        4000, "invalid_request_error.beta_api_shape_disabled")


def test_a_bad_event_is_an_in_band_error_and_the_session_goes_on() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    send(conn, 1.0, "session.update", session={"output_modalities": ["text"]}, event_id="ev_1")
    send(conn, 1.0, "no.such.event")
    send(conn, 1.0, "input_audio_buffer.append", audio="***")
    errors = events(conn.poll(1.0))
    assert [e["type"] for e in errors] == ["error"] * 3
    assert errors[0]["error"] == {
        "type": "invalid_request_error", "code": "missing_required_parameter",
        "message": "Missing required parameter: 'session.type'.", "param": "session.type",
        "event_id": "ev_1"}
    assert errors[1]["error"]["param"] == "type" and errors[2]["error"]["param"] == "audio"
    assert not conn.closing
    text_session(conn, 2.0)
    assert kinds(conn.poll(2.0)) == ["session.updated"]


def test_session_update_is_answered_with_the_whole_session() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    text_session(conn, 1.0)
    (updated,) = events(conn.poll(1.0))
    session = updated["session"]
    assert session["output_modalities"] == ["text"]
    assert session["instructions"] == "Be brief."
    assert session["tools"] == [BOOK_TOOL]


def test_a_text_turn_is_answered_when_asked_with_a_whole_response() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    text_session(conn, 1.0)
    user_text(conn, 1.0, "Hello there")
    assert kinds(conn.poll(1.0)) == ["session.updated", "conversation.item.added",
                                     "conversation.item.done"]
    assert conn.poll(10.0) == []  # no answer unasked
    send(conn, 10.0, "response.create")
    got = events(conn.poll(20.0))
    assert [f["type"] for f in got] == [
        "response.created", "rate_limits.updated", "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "conversation.item.done",
        "response.done"]
    done = got[-1]["response"]
    assert done["status"] == "completed" and done["id"] == got[0]["response"]["id"]
    assert done["output"][0]["content"][0]["type"] == "output_text"
    assert done["usage"]["output_tokens"] > 0


def test_a_function_call_waits_for_its_output_and_response_create() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    text_session(conn, 1.0)
    user_text(conn, 1.0, "Book me the 3pm slot tomorrow, please.")
    send(conn, 1.0, "response.create")
    got = events(conn.poll(10.0))
    (args,) = [f for f in got if f["type"] == "response.function_call_arguments.done"]
    assert args["name"] == "book_slot" and json.loads(args["arguments"])
    assert got[-1]["type"] == "response.done"
    send(conn, 10.0, "conversation.item.create", item={
        "type": "function_call_output", "call_id": args["call_id"],
        "output": json.dumps({"status": "booked"})})
    assert kinds(conn.poll(20.0)) == ["conversation.item.added", "conversation.item.done"]
    send(conn, 20.0, "response.create")
    said = [f["delta"] for f in events(conn.poll(30.0))
            if f["type"] == "response.output_text.delta"]
    assert said and "book" in " ".join(said).lower()


def test_response_create_while_one_is_active_is_an_error() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    user_text(conn, 1.0, "Hello there")
    send(conn, 1.0, "response.create")
    send(conn, 1.01, "response.create")
    errors = [f for f in events(conn.poll(1.01)) if f["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == ["conversation_already_has_active_response"]


def test_response_cancel_cancels_the_response_under_way() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    user_text(conn, 1.0, "Hello there")
    send(conn, 1.0, "response.create")
    first = events(conn.poll(1.0))
    created = next(f for f in first if f["type"] == "response.created")
    send(conn, 1.05, "response.cancel")
    got = events(conn.poll(30.0))
    assert [f["type"] for f in got] == ["response.done"]
    assert got[0]["response"]["id"] == created["response"]["id"]
    assert got[0]["response"]["status_details"] == {"type": "cancelled",
                                                    "reason": "client_cancelled"}
    send(conn, 30.0, "response.cancel")
    (error,) = events(conn.poll(30.0))
    assert error["error"]["code"] == "response_cancel_not_active"


def pcm24(seconds: float, speech: bool) -> str:
    samples = synthesise("book me the three pm slot tomorrow please", 24000)[: int(24000 * seconds)]
    if not speech:
        samples = np.zeros(int(24000 * seconds), dtype=np.int16)
    return base64.b64encode(samples.astype("<i2").tobytes()).decode()


def stream(conn: Connection, start: float, seconds: float, speech: bool) -> float:
    """Audio in 100 ms appends from `start`, as a client streams it; the time after it."""
    now = start
    for _ in range(round(seconds / 0.1)):
        send(conn, now, "input_audio_buffer.append", audio=pcm24(0.1, speech))
        now += 0.1
    return now


def test_server_vad_ends_the_turn_and_answers_it() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    end = stream(conn, 1.0, 1.5, speech=True)
    end = stream(conn, end, 1.0, speech=False)
    got = kinds(conn.poll(end + 10))
    assert got[:5] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                       "input_audio_buffer.committed", "conversation.item.added",
                       "conversation.item.done"]
    assert "response.output_audio.delta" in got and got[-1] == "response.done"
    assert got.index("response.output_audio_transcript.delta") < got.index(
        "response.output_audio.delta")


def test_with_turn_detection_off_a_commit_makes_the_turn_and_response_create_answers() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    send(conn, 1.0, "session.update", session={"type": "realtime",
                                               "audio": {"input": {"turn_detection": None}}})
    send(conn, 1.0, "input_audio_buffer.commit")
    stream(conn, 1.0, 1.0, speech=True)
    send(conn, 2.0, "input_audio_buffer.commit")
    got = events(conn.poll(5.0))
    assert [f["type"] for f in got] == ["session.updated", "error", "input_audio_buffer.committed",
                                        "conversation.item.added", "conversation.item.done"]
    assert got[0]["session"]["audio"]["input"]["turn_detection"] is None
    assert got[1]["error"]["code"] == "input_audio_buffer_commit_empty"
    send(conn, 5.0, "response.create")
    assert kinds(conn.poll(30.0))[-1] == "response.done"


def test_speech_during_a_response_cancels_it() -> None:
    conn = opened(emulator(audio_speedup=1.0))
    conn.poll(1.0)
    user_text(conn, 1.0, "Tell me about the weather in some detail")
    send(conn, 1.0, "response.create")
    conn.poll(2.0)
    end = stream(conn, 2.0, 1.0, speech=True)
    got = events(conn.poll(end))
    done = [f for f in got if f["type"] == "response.done"]
    assert [d["response"]["status_details"] for d in done] == [
        {"type": "cancelled", "reason": "turn_detected"}]


def test_the_session_cap_ends_with_session_expired_and_a_close_1001() -> None:
    conn = opened(emulator(connection_lifetime_s=60.0))
    conn.poll(1.0)
    actions = conn.poll(61.0)
    (error,) = events(actions)
    assert error["error"]["code"] == "session_expired"
    assert error["error"]["message"] == "Your session hit the maximum duration of 1 minutes."
    assert (actions[-1].code, actions[-1].reason) == (1001, error["error"]["message"])


@pytest.mark.parametrize("name", ["openai-realtime", "openai-realtime-2025-08"])
def test_openai_personalities_speak_openai(name: str) -> None:
    assert PERSONALITIES[name].protocol == "openai"


def test_each_event_shows_its_item_as_it_was_then() -> None:
    """An item added in_progress is shown so, though it is completed by the response's end."""
    conn = opened(emulator())
    conn.poll(1.0)
    user_text(conn, 1.0, "Hello there")
    send(conn, 1.0, "response.create")
    got = events(conn.poll(30.0))
    created = next(f for f in got if f["type"] == "response.created")
    added = next(f for f in got if f["type"] == "response.output_item.added")
    done = next(f for f in got if f["type"] == "response.output_item.done")
    assert created["response"]["output"] == []
    assert (added["item"]["status"], added["item"]["content"]) == ("in_progress", [])
    assert done["item"]["status"] == "completed"


def test_an_answer_withdrawn_by_a_clear_is_answered_when_asked_again() -> None:
    """Speech, then input_audio_buffer.clear, then a text turn and response.create: the
    response is whole (the cleared speech leaves no one speaking)."""
    conn = opened(emulator())
    conn.poll(1.0)
    stream(conn, 1.0, 1.0, speech=True)
    send(conn, 2.0, "input_audio_buffer.clear")
    user_text(conn, 2.0, "Hello there")
    send(conn, 2.0, "response.create")
    got = kinds(conn.poll(30.0))
    assert got.count("response.created") == 1 and got[-1] == "response.done"


def test_a_cancel_before_an_answer_begins_cancels_no_earlier_response() -> None:
    """A response completes; speech ends a turn (its answer due); response.cancel then: a
    cancelled response.done of its own, not the earlier one's again."""
    conn = opened(emulator())
    conn.poll(1.0)
    user_text(conn, 1.0, "Hello there")
    send(conn, 1.0, "response.create")
    first = [f for f in events(conn.poll(10.0)) if f["type"] == "response.done"]
    speech = synthesise("book me the three pm slot tomorrow please", 24000)
    audio = np.concatenate([speech, np.zeros(24000, np.int16)]).astype("<i2").tobytes()
    send(conn, 10.0, "input_audio_buffer.append", audio=base64.b64encode(audio).decode())
    conn.poll(10.0)
    send(conn, 10.02, "response.cancel")
    done = [f for f in events(conn.poll(10.03)) if f["type"] == "response.done"]
    assert [d["response"]["status"] for d in done] == ["cancelled"]
    assert done[0]["response"]["id"] != first[0]["response"]["id"]


def test_bad_items_are_in_band_errors_not_emulator_bugs() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    send(conn, 1.0, "conversation.item.create", item={
        "id": [1], "type": "message", "role": "user", "content": []})
    send(conn, 1.0, "conversation.item.create", item={
        "type": "function_call_output", "call_id": "call_x", "output": "[" * 5000 + "]" * 5000})
    got = events(conn.poll(1.0))
    assert [f["type"] for f in got] == ["error", "conversation.item.added",
                                        "conversation.item.done"]
    assert got[0]["error"]["param"] == "item.id" and not conn.closing


def test_speech_heard_before_the_session_is_told_in_order() -> None:
    """Speech and its end in one message sent at once: session.created first, then
    speech_started, then speech_stopped."""
    conn = opened(emulator())
    speech = synthesise("book me the three pm slot tomorrow please", 24000)
    audio = np.concatenate([speech, np.zeros(24000, np.int16)]).astype("<i2").tobytes()
    send(conn, 0.001, "input_audio_buffer.append", audio=base64.b64encode(audio).decode())
    got = kinds(conn.poll(5.0))
    assert got[:3] == ["session.created", "input_audio_buffer.speech_started",
                       "input_audio_buffer.speech_stopped"]


def test_tools_are_replaced_and_an_unchanged_vad_keeps_what_it_heard() -> None:
    conn = opened(emulator())
    conn.poll(1.0)
    text_session(conn, 1.0)
    send(conn, 1.0, "session.update", session={"type": "realtime", "tools": []})
    (updated,) = [f for f in events(conn.poll(1.0)) if f["type"] == "session.updated"][-1:]
    assert updated["session"]["tools"] == []
    end = stream(conn, 2.0, 0.8, speech=True)
    vad = {"type": "server_vad", "silence_duration_ms": 500, "prefix_padding_ms": 300}
    send(conn, end, "session.update", session={"type": "realtime",
                                               "audio": {"input": {"turn_detection": vad}}})
    end = stream(conn, end, 0.7, speech=True)
    stream(conn, end, 1.0, speech=False)
    heard = [f for f in events(conn.poll(end + 10)) if f["type"] == "input_audio_buffer.committed"]
    assert len(heard) == 1
