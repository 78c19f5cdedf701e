"""Expectations on streaming sessions, judged on hand-written event lists (pure logic)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from faultlab.events import Event
from faultlab.expect import DeliveredAudioRatio, NoReply, Recovered, ResumesRefused, RunFacts
from faultlab.protocols import OPENAI
from faultlab.scenarios.booking.expectations import Bookings, Truthful, claim_of


def ev(t: float, name: str, source: str = "client", **fields: Any) -> Event:
    return Event(t, source, name, fields)


def facts(*events: Event) -> RunFacts:
    return RunFacts(sorted(events, key=lambda e: e.t))


BOOKED = [ev(1.0, "backend.job", booking="B1"), ev(5.0, "backend.commit", booking="B1")]


@pytest.mark.parametrize(("text", "claim"), [
    ("Yes, your slot tomorrow at 3pm is booked.", "committed"),
    ("Yes, it's booked.", "committed"),
    ("I'm booking it now; it's still in progress.", "pending"),
    ("I'm booking it now. Done: your slot tomorrow 3pm is booked.", "pending"),
    ("I haven't booked anything yet.", "none"),
    ("No, the booking failed.", "failed"),
    ("You said: hello", "unclear"),
])
def test_what_an_answer_claims(text: str, claim: str) -> None:
    """An answer's first claim about the booking decides (a later sentence does not mend it)."""
    assert claim_of(text) == claim


def test_truthful_judges_the_first_answer_after_the_question_against_the_ledger() -> None:
    """The answer to "Did you book it?" is compared with what the backend had done by then;
    answers before the question do not count; no answer at all is not the truth."""
    ask = ev(6.0, "client.ask")
    told = facts(*BOOKED, ev(3.0, "client.answer", text="I'm booking it now."), ask,
                 ev(6.8, "client.answer", text="Yes, it's booked."))
    assert Truthful(truthful=True).check(told).held
    assert not Truthful(truthful=False).check(told).held
    untrue = facts(*BOOKED, ask, ev(6.8, "client.answer", text="It's still in progress."))
    outcome = Truthful(truthful=True).check(untrue)
    assert not outcome.held and "backend: committed" in outcome.seen
    never = facts(*BOOKED)
    assert Truthful(truthful=False).check(never).held
    assert "never got to ask" in Truthful(truthful=False).check(never).seen
    early = facts(ev(1.0, "backend.job", booking="B1"), ask,
                  ev(6.5, "client.answer", text="Yes, it's booked."),
                  ev(9.0, "backend.commit", booking="B1"))
    assert not Truthful(truthful=True).check(early).held  # claimed before the commit


def test_bookings_count_distinct_bookings_not_calls() -> None:
    """A deduplicated re-issued call joins its booking."""
    f = facts(*BOOKED, ev(7.0, "backend.deduped", booking="B1"))
    outcome = Bookings(bookings=1).check(f)
    assert outcome.held and outcome.seen == "1 (1 committed, 1 deduplicated)"
    assert not Bookings(bookings=2).check(f).held


def test_resumes_refused_with_a_code() -> None:
    """`every`: all attempts before the first success refused with that code; `at_least`."""
    attempts = [ev(2.0 + i, "resume.refused", code=1011) for i in range(3)]
    locked = facts(*attempts)
    assert ResumesRefused(resumes_refused=1011, every=True, at_least=3).check(locked).held
    assert not ResumesRefused(resumes_refused=1011, at_least=4).check(locked).held
    mixed = facts(*attempts, ev(5.5, "resume.refused", code=1007))
    assert not ResumesRefused(resumes_refused=1011, every=True).check(mixed).held
    assert ResumesRefused(resumes_refused=1011, at_least=3).check(mixed).held
    after_ok = facts(*attempts, ev(6.0, "resume.ok"), ev(9.0, "resume.refused", code=1007))
    outcome = ResumesRefused(resumes_refused=1011, every=True).check(after_ok)
    assert outcome.held and outcome.seen == "3x 1011, then resumed"


def test_recovered_within_counts_from_the_first_fault() -> None:
    f = facts(ev(2.0, "fault.applied", "faultlab", step="cut"), ev(8.5, "client.recovered"))
    assert Recovered.model_validate({"recovered_within": "7s"}).check(f).held
    outcome = Recovered.model_validate({"recovered_within": "6s"}).check(f)
    assert not outcome.held and outcome.seen == "+6.500s"
    assert not Recovered.model_validate({"recovered_within": "6s"}).check(
        facts(ev(2.0, "fault.applied", "faultlab"))).held


def frame(t: float, audio_s: float, conn: int = 1) -> Event:
    return ev(t, "emulator.frame", "target", conn=conn, **{"from": "client"}, kind="realtime_input.audio",
              audio_s=audio_s)


def test_delivered_audio_ratio_is_uplink_audio_over_the_sessions_wall_time() -> None:
    """From the connection's first audio frame to its end: a 2 s hole in 5 s of wall time gives
    0.6; a steady stream gives 1.0; the connection with most audio is the one judged."""
    steady = [frame(1.0 + i * 0.1, 0.1) for i in range(50)]
    end = ev(6.0, "emulator.disconnect", "target", conn=1)
    ratio = DeliveredAudioRatio.model_validate({"delivered_audio_ratio": {"at_least": 0.95}})
    assert ratio.check(facts(*steady, end, frame(1.0, 0.05, conn=2))).held
    holed = [f for f in steady if not 2.0 <= f.t < 4.0]
    low = DeliveredAudioRatio.model_validate({"delivered_audio_ratio": {"at_most": 0.8}})
    outcome = low.check(facts(*holed, end))
    assert outcome.held and outcome.seen.startswith("0.600")
    assert not ratio.check(facts()).held
    with pytest.raises(ValidationError):
        DeliveredAudioRatio.model_validate({"delivered_audio_ratio": {}})


def test_no_reply_within_a_window_or_ever() -> None:
    """A reply is the model speaking or calling a tool, in the emulator's or proxy's frames."""
    stall = ev(3.0, "fault.applied", "faultlab", step="stall")
    reply = ev(7.0, "proxy.frame", "proxy", **{"from": "server"},
               kind="server_content.model_turn")
    window = {"no_reply": {"within": "3s", "after": {"event": "fault.applied"}}}
    assert NoReply.model_validate(window).check(facts(stall, reply)).held
    late = NoReply.model_validate({"no_reply": {"within": "5s", "after": {"event": "fault.applied"}}})
    assert not late.check(facts(stall, reply)).held
    ever = NoReply.model_validate({"no_reply": {}})
    assert not ever.check(facts(stall, reply)).held
    uplink = ev(7.0, "proxy.frame", "proxy", **{"from": "client"}, kind="realtime_input.audio")
    assert ever.check(facts(stall, uplink)).held


def test_a_reply_is_what_the_runs_protocol_calls_one() -> None:
    """Over OpenAI Realtime the model's audio delta is a reply and Gemini's kinds mean nothing;
    over Gemini Live the reverse."""
    stall = ev(3.0, "fault.applied", "faultlab", step="stall")
    audio = ev(7.0, "proxy.frame", "proxy", **{"from": "server"}, kind="response.audio.delta")
    gemini = ev(7.0, "proxy.frame", "proxy", **{"from": "server"},
                kind="server_content.model_turn")
    ever = NoReply.model_validate({"no_reply": {}})
    assert not ever.check(RunFacts([stall, audio], protocol=OPENAI)).held
    assert ever.check(RunFacts([stall, gemini], protocol=OPENAI)).held
    assert ever.check(RunFacts([stall, audio])).held
