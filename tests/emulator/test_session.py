"""The sans-I/O core on a fake clock: handles, lockout, release windows, reaping, goAway."""

from __future__ import annotations

import json
from typing import Any

from faultlab.emulator.outbox import Action
from faultlab.emulator.personality import PERSONALITIES
from faultlab.emulator.session import Connection, Emulator
from faultlab.scenarios.booking.brain import booking_assistant

DEV = PERSONALITIES["gemini-dev-2026-10"]


def setup(handle: str | None = None, **extra: Any) -> str:
    s: dict[str, Any] = {"model": "models/gemini-3.8-live",
                         "generationConfig": {"responseModalities": ["TEXT"]},
                         "sessionResumption": {"handle": handle} if handle else {}}
    s.update(extra)
    return json.dumps({"setup": s})


def frames(actions: list[Action]) -> list[dict[str, Any]]:
    return [a.frame for a in actions if a.frame is not None]


def closes(actions: list[Action]) -> list[tuple[int, str]]:
    return [(a.code, a.reason) for a in actions if a.frame is None]


def open_session(em: Emulator, now: float) -> tuple[Connection, str]:
    conn = em.connect(now)
    conn.receive(setup(), now)
    out = frames(conn.poll(now + 1))
    (update,) = [f["sessionResumptionUpdate"] for f in out if "sessionResumptionUpdate" in f]
    assert out[0] == {"setupComplete": {}}
    return conn, update["newHandle"]


def test_one_resumption_update_per_connection_with_a_36_char_handle() -> None:
    """setupComplete first (S1: 246-351 ms), then exactly one update 110-150 ms later (U1)."""
    em = Emulator(DEV, seed=1)
    conn = em.connect(0.0)
    conn.receive(setup(), 0.0)
    out = conn.poll(10.0)
    assert 0.246 <= out[0].at <= 0.351 and out[0].frame == {"setupComplete": {}}
    updates = [a for a in out if a.frame and "sessionResumptionUpdate" in a.frame]
    assert len(updates) == 1 and 0.110 <= updates[0].at - out[0].at <= 0.150
    assert len(updates[0].frame["sessionResumptionUpdate"]["newHandle"]) == 36  # type: ignore[index]


def test_held_connection_locks_resumes_and_closing_it_unlocks() -> None:
    """L1/L3: refused with 1011 while the old connection is open; accepted once it closed."""
    em = Emulator(DEV, seed=1)
    old, handle = open_session(em, 0.0)
    for t in (20.0, 40.0, 300.0):
        attempt = em.connect(t)
        attempt.receive(setup(handle), t)
        out = attempt.poll(t + 5)
        assert closes(out) == [(1011, "Internal error encountered.")]
        assert 0.472 <= out[0].at - t <= 0.704 and not frames(out)
    old.peer_closed(301.0)
    resumed = em.connect(301.1)
    resumed.receive(setup(handle), 301.1)
    assert frames(resumed.poll(305))[0] == {"setupComplete": {}}


def test_a_close_is_told_when_it_is_due_not_when_it_is_decided() -> None:
    """A refused resume's close falls due 0.472-0.704 s after the setup (R1, L2): its
    `emulator.close` is told then, as it is sent, and not if the client left first."""
    told: list[tuple[str, dict[str, Any]]] = []
    em = Emulator(DEV, seed=1, emit=lambda name, **fields: told.append((name, fields)))
    _, handle = open_session(em, 0.0)
    attempt = em.connect(20.0)
    attempt.receive(setup(handle), 20.0)
    assert attempt.poll(20.4) == [] and not [n for n, _ in told if n == "emulator.close"]
    assert closes(attempt.poll(21.0)) == [(1011, "Internal error encountered.")]
    assert [f for n, f in told if n == "emulator.close"] == [
        {"conn": 2, "code": 1011, "reason": "Internal error encountered.",
         "why": "resume refused: the old connection 1 is still open"}]
    gone = em.connect(30.0)
    gone.receive(setup(handle), 30.0)
    gone.peer_closed(30.1)
    assert gone.poll(31.0) == [] and len([n for n, _ in told if n == "emulator.close"]) == 1


def test_idle_drop_is_refused_for_a_window_then_accepted() -> None:
    """R1/R2: right after an idle drop of an active session, 1011; 1.5 s later, accepted."""
    em = Emulator(DEV, seed=2)
    conn, handle = open_session(em, 0.0)
    conn.receive(json.dumps({"clientContent": {"turns": [{"role": "user", "parts": [
        {"text": "hi"}]}], "turnComplete": True}}), 1.0)
    assert frames(conn.poll(5.0))
    conn.peer_closed(6.0)
    early = em.connect(6.0)
    early.receive(setup(handle), 6.0)
    assert closes(early.poll(8.0)) == [(1011, "Internal error encountered.")]
    late = em.connect(7.6)
    late.receive(setup(handle), 7.6)
    assert frames(late.poll(9.0))[0] == {"setupComplete": {}}


def test_drop_while_speaking_resumes_at_once() -> None:
    """R3: a drop while the model's audio is still playing leaves no refusal window."""
    em = Emulator(DEV, seed=3)
    conn = em.connect(0.0)
    conn.receive(setup(generationConfig={"responseModalities": ["AUDIO"]}), 0.0)
    handle = next(f["sessionResumptionUpdate"]["newHandle"] for f in frames(conn.poll(1.0))
                  if "sessionResumptionUpdate" in f)
    conn.receive(json.dumps({"clientContent": {"turns": [{"role": "user", "parts": [
        {"text": "tell me something long please"}]}], "turnComplete": True}}), 1.0)
    conn.poll(2.2)  # the reply started (0.5-1.1 s) and is still playing
    conn.peer_closed(2.2)
    again = em.connect(2.2)
    again.receive(setup(handle), 2.2)
    assert frames(again.poll(3.5))[0] == {"setupComplete": {}}


def test_silent_connection_is_reaped_and_the_handle_dies() -> None:
    """L7: 480 s (scaled) after the last client message: close 1011, then the handle is dead."""
    em = Emulator(DEV, time_scale=0.01, seed=4)
    conn, handle = open_session(em, 0.0)
    assert conn.next_due() == 4.8
    assert closes(conn.poll(4.8)) == [(1011, "Internal error encountered.")]
    assert dead_handle_answers(em, handle, 10.0) <= {(1011, "Internal error encountered."), None}


def dead_handle_answers(em: Emulator, handle: str, t: float,
                        attempts: int = 30) -> set[tuple[int, str] | None]:
    """What resumes of a dead handle get (None: no answer), checked to be the field's mix (S5)."""
    answers: list[tuple[int, str] | None] = []
    for i in range(attempts):
        attempt = em.connect(t + i)
        attempt.receive(setup(handle), t + i)
        out = attempt.poll(t + i + 0.9)
        assert not frames(out)
        answers.append(closes(out)[0] if closes(out) else None)
        if answers[-1] is None:  # never answered: only reaped once silent long enough (L7)
            due = attempt.next_due()
            assert due is not None and abs(due - (t + i + em.scaled(em.personality.reap_after_s))) < 1e-9
    silent = answers.count(None) / attempts
    assert 0.0 < silent < 0.6, answers  # 4 of 18 in the field's P4
    return set(answers)


def test_a_handle_never_issued_is_refused_as_invalid() -> None:
    """S5's guess: 1007 for a handle the service never issued."""
    em = Emulator(DEV, seed=4)
    attempt = em.connect(0.0)
    attempt.receive(setup("0b7e0ae6-5a2b-4c36-9e1b-6f1b2f3f0a11"), 0.0)
    assert closes(attempt.poll(1.0)) == [(1007, "Request contains an invalid argument.")]


def test_no_goaway_by_default_and_a_lifetime_as_an_option() -> None:
    """L9: no goAway ever by default; with a lifetime, goAway(timeLeft) then close 1011."""
    em = Emulator(DEV, seed=5)
    conn, _ = open_session(em, 0.0)
    assert not any("goAway" in f for f in frames(conn.poll(400.0)))
    short = Emulator(DEV.model_copy(update={"connection_lifetime_s": 600.0}), seed=5)
    c = short.connect(0.0)
    c.receive(setup(), 0.0)
    c.receive(json.dumps({"clientContent": {"turnComplete": False}}), 470.0)
    out = c.poll(700.0)
    go = [a for a in out if a.frame and "goAway" in a.frame]
    assert go and go[0].at == 540.0 and go[0].frame == {"goAway": {"timeLeft": "60s"}}
    assert closes(out) == [(1011, "Deadline expired before operation could complete.")]


def test_keys_are_accepted_in_either_spelling() -> None:
    """Mixed camelCase and snake_case at every level, as the SDK sends them."""
    em = Emulator(DEV, seed=6)
    conn = em.connect(0.0)
    conn.receive(json.dumps({"setup": {"model": "models/gemini-3.8-live", "generation_config": {
        "responseModalities": ["TEXT"]}, "realtimeInputConfig": {"automatic_activity_detection": {
            "silence_duration_ms": 500}}}}), 0.0)
    conn.receive(json.dumps({"client_content": {"turns": [{"role": "user", "parts": [
        {"text": "hello"}]}], "turn_complete": True}}), 0.5)
    out = frames(conn.poll(5.0))
    assert any("modelTurn" in f.get("serverContent", {}) for f in out)
    assert not closes(conn.poll(5.0))


def say(conn: Connection, text: str, now: float, role: str = "user", done: bool = True) -> None:
    conn.receive(json.dumps({"clientContent": {"turns": [{"role": role, "parts": [{"text": text}]}],
                                               "turnComplete": done}}), now)


BOOKING_TOOLS = [{"functionDeclarations": [{"name": "book_slot", "behavior": "NON_BLOCKING"}]}]


def test_barge_in_interrupts_the_playing_turn() -> None:
    """T4/T7: a new user turn while the model's audio plays: interrupted, then turnComplete
    2-7 ms later, and the rest of the old turn's audio is never sent."""
    em = Emulator(DEV, seed=8)
    conn = em.connect(0.0)
    conn.receive(setup(generationConfig={"responseModalities": ["AUDIO"]}), 0.0)
    conn.poll(1.0)
    say(conn, "tell me a long story about the sea and the ships on it", 1.0)
    first = conn.poll(2.2)  # part of the reply's audio is out
    assert any("modelTurn" in f.get("serverContent", {}) for f in frames(first))
    cut = max(a.turn for a in first)
    say(conn, "stop", 2.2)
    out = conn.poll(2.3)
    kinds = [(a.at, next(iter(a.frame["serverContent"]))) for a in out
             if a.frame and "serverContent" in a.frame]
    assert kinds[0] == (2.2, "interrupted")
    assert kinds[1][1] == "turnComplete" and 0.002 <= kinds[1][0] - 2.2 <= 0.007
    assert not [a for a in conn.poll(10.0) if a.turn == cut]


def test_manual_activity_signals_when_vad_is_disabled() -> None:
    """With automatic detection disabled, activityStart/activityEnd delimit the user's turn."""
    import base64

    import numpy as np

    em = Emulator(DEV, seed=9)
    conn = em.connect(0.0)
    conn.receive(setup(realtimeInputConfig={"automaticActivityDetection": {"disabled": True}}), 0)
    conn.poll(1.0)
    tone = (np.sin(np.arange(8000) / 5) * 8000).astype("<i2").tobytes()
    conn.receive(json.dumps({"realtimeInput": {"activityStart": {}}}), 1.0)
    conn.receive(json.dumps({"realtimeInput": {"audio": {
        "data": base64.b64encode(tone).decode(), "mimeType": "audio/pcm;rate=16000"}}}), 1.1)
    assert not frames(conn.poll(3.0))  # no end of turn without activityEnd
    conn.receive(json.dumps({"realtimeInput": {"activityEnd": {}}}), 3.0)
    reply = frames(conn.poll(6.0))
    text = " ".join(p["text"] for f in reply for p in f.get("serverContent", {}).get(
        "modelTurn", {}).get("parts", []))
    assert "[speech 0.5s]" in text


def test_new_session_without_status_line_reissues_the_call() -> None:
    """A session restored from a transcript lacking the booking's status books again (new id,
    drifted slot) and says it is booking; with a status line it answers truthfully."""
    em = Emulator(DEV, seed=10, brain=booking_assistant())
    for status, expect_call in ((None, True), ("[status] book_slot tomorrow 3pm: committed", False)):
        conn = em.connect(0.0)
        conn.receive(setup(tools=BOOKING_TOOLS), 0.0)
        conn.poll(1.0)
        say(conn, "Book me the 3pm slot tomorrow, please.", 1.0, done=False)
        if status:
            say(conn, status, 1.0, role="user", done=False)
        say(conn, "Did you book it?", 1.1)
        out = frames(conn.poll(5.0))
        calls = [f["toolCall"]["functionCalls"][0] for f in out if "toolCall" in f]
        text = " ".join(p["text"] for f in out for p in f.get("serverContent", {}).get(
            "modelTurn", {}).get("parts", []))
        if expect_call:
            assert calls and calls[0]["args"] == {"slot": "tomorrow 3pm"}
            assert "I'm booking it now" in text
        else:
            assert not calls and "Yes" in text


def resumed_in_time(em: Emulator) -> tuple[Connection, str]:
    """A session dropped at 1 s and resumed at 50 s (within its handles' 72 s at scale 0.01)."""
    conn, handle = open_session(em, 0.0)
    conn.peer_closed(1.0)
    resumed = em.connect(50.0)
    resumed.receive(setup(handle), 50.0)
    assert frames(resumed.poll(51.0))[0] == {"setupComplete": {}}
    return resumed, handle


def test_handles_expire_two_hours_after_the_session_ended() -> None:
    """A handle resumes within its lifetime and is dead after it (S5: 1011 or no answer)."""
    em = Emulator(DEV, time_scale=0.01, seed=11)  # 2 h -> 72 s
    ok, handle = resumed_in_time(em)
    ok.peer_closed(51.0)
    assert dead_handle_answers(em, handle, 124.0) <= {(1011, "Internal error encountered."), None}


def test_context_update_declares_tools() -> None:
    """contextUpdate (the SDK's send_context_update) adds tools the model may call."""
    em = Emulator(DEV, seed=12, brain=booking_assistant())
    conn, _ = open_session(em, 0.0)
    conn.receive(json.dumps({"contextUpdate": {"tools": {"tools": [{"functionDeclarations": [
        {"name": "book_slot"}]}]}}}), 1.0)
    say(conn, "Book me the 3pm slot tomorrow, please.", 1.0)
    assert any("toolCall" in f for f in frames(conn.poll(3.0)))


def test_speech_cut_by_a_drop_is_partly_repeated_after_the_resume() -> None:
    """R6: a drop while the model speaks; the resumed connection speaks the rest again, from a
    little before the cut (with the transcript of what it repeats)."""
    em = Emulator(DEV, seed=3)
    conn = em.connect(0.0)
    conn.receive(setup(generationConfig={"responseModalities": ["AUDIO"]},
                       outputAudioTranscription={}), 0.0)
    handle = next(f["sessionResumptionUpdate"]["newHandle"] for f in frames(conn.poll(1.0))
                  if "sessionResumptionUpdate" in f)
    say(conn, "tell me about the ships that sail on the sea tonight", 1.0)
    conn.poll(3.0)  # the reply started 0.5-1.1 s after the turn and is still playing
    conn.peer_closed(3.0)
    again = em.connect(3.0)
    again.receive(setup(handle, generationConfig={"responseModalities": ["AUDIO"]},
                        outputAudioTranscription={}), 3.0)
    out = frames(again.poll(20.0))
    repeated = [f["serverContent"]["outputTranscription"]["text"] for f in out
                if "outputTranscription" in f.get("serverContent", {})]
    full = "You said: tell me about the ships that sail on the sea tonight"
    assert len(repeated) == 1 and full.endswith(repeated[0]) and repeated[0] != full
    assert any("inlineData" in p for f in out
               for p in f.get("serverContent", {}).get("modelTurn", {}).get("parts", []))


def test_a_connection_whose_tcp_gave_up_keeps_the_session_locked_until_reaped() -> None:
    """L8: the server's TCP gives up (ETIMEDOUT): resumes are still refused (1011); once the
    connection would have been reaped (L7), the handle is dead (S5: 1011 or no answer)."""
    em = Emulator(DEV, seed=4)
    old, handle = open_session(em, 0.0)
    old.peer_closed(120.0, timed_out=True)
    attempt = em.connect(130.0)
    attempt.receive(setup(handle), 130.0)
    assert closes(attempt.poll(135.0)) == [(1011, "Internal error encountered.")]
    # 480 s after the last client message
    assert dead_handle_answers(em, handle, 500.0) <= {(1011, "Internal error encountered."), None}


def test_a_status_line_alone_gets_the_model_to_say_where_the_job_stands() -> None:
    """A restored session told "[status] book_slot(...): pending" says it is still booking;
    "committed" that it is booked."""
    for status, words in (("pending", "still booking"), ("committed", "is booked")):
        em = Emulator(DEV, seed=11, brain=booking_assistant())
        conn = em.connect(0.0)
        conn.receive(setup(tools=BOOKING_TOOLS), 0.0)
        conn.poll(1.0)
        say(conn, "Book me the 3pm slot tomorrow, please.", 1.0, done=False)
        say(conn, f"[status] book_slot(tomorrow at 3pm): {status}, booking B1", 1.0)
        out = frames(conn.poll(5.0))
        text = " ".join(p["text"] for f in out for p in f.get("serverContent", {}).get(
            "modelTurn", {}).get("parts", []))
        assert words in text and not any("toolCall" in f for f in out)


def test_a_session_is_forgotten_when_its_handles_die_with_no_connection_after() -> None:
    """Memory: a dropped session goes when its handles die (2 h after the drop, or at once when
    reaped), at the time `next_due` says, with no later connection; its handles stay dead."""
    em = Emulator(DEV, time_scale=0.01, seed=11)  # 2 h -> 72 s, 480 s -> 4.8 s
    kept, kept_handle = open_session(em, 0.0)
    kept.peer_closed(1.0)
    reaped, reaped_handle = open_session(em, 0.0)
    closes(reaped.poll(4.8))  # reaped: closed 1011 and dead
    assert em.next_due() == 4.8
    em.poll(4.8)
    assert reaped_handle not in em.handles.sessions and reaped_handle in em.handles.dead
    assert kept_handle in em.handles.sessions and em.next_due() == 73.0
    em.poll(72.9)
    assert kept_handle in em.handles.sessions
    em.poll(73.0)
    assert not em.handles.sessions and em.next_due() is None
    assert dead_handle_answers(em, kept_handle, 80.0) <= {(1011, "Internal error encountered."), None}


def test_a_session_resumed_in_time_is_not_forgotten_at_the_old_deadline() -> None:
    """A resume before the handles die keeps the session; its own drop sets the new deadline."""
    em = Emulator(DEV, time_scale=0.01, seed=11)
    again, handle = resumed_in_time(em)
    em.poll(73.0)
    assert em.handles.sessions[handle].holder is again
    again.peer_closed(60.0)
    em.poll(131.9)
    assert handle in em.handles.sessions
    em.poll(132.0)
    assert handle not in em.handles.sessions


def test_a_session_held_past_its_tcps_end_is_forgotten_once_reaped() -> None:
    """L8 then L7 with nobody resuming: the session is reaped and forgotten at the reap time."""
    em = Emulator(DEV, seed=4)
    old, handle = open_session(em, 0.0)
    old.peer_closed(120.0, timed_out=True)
    assert em.next_due() == 480.0
    em.poll(480.0)
    assert handle not in em.handles.sessions and handle in em.handles.dead


def test_manual_activity_holds_at_most_sixty_seconds_of_audio() -> None:
    """Memory: between activityStart and activityEnd the last 60 s are kept; the turn is heard
    as 60 s, and the event says how much was dropped."""
    import base64

    import numpy as np

    events: list[dict[str, Any]] = []
    em = Emulator(DEV, seed=9, emit=lambda name, **f: events.append({"event": name, **f}))
    conn = em.connect(0.0)
    conn.receive(setup(realtimeInputConfig={"automaticActivityDetection": {"disabled": True}}), 0)
    conn.poll(1.0)
    conn.receive(json.dumps({"realtimeInput": {"activityStart": {}}}), 1.0)
    tone = (np.sin(np.arange(10 * 16000) / 5) * 8000).astype("<i2").tobytes()
    for i in range(7):
        conn.receive(json.dumps({"realtimeInput": {"audio": {
            "data": base64.b64encode(tone).decode(), "mimeType": "audio/pcm;rate=16000"}}}), 1.1 + i)
    assert conn.turns._manual_audio is not None and len(conn.turns._manual_audio) == 60 * 16000
    conn.receive(json.dumps({"realtimeInput": {"activityEnd": {}}}), 9.0)
    (heard,) = [e for e in events if e["event"] == "emulator.heard"]
    assert heard["audio_s"] == 60.0 and heard["dropped_s"] == 10.0
    assert heard["text"] == "[speech 60.0s]"
