"""What the booking pack judges and shows: whether the user was told the truth about the booking
(against the backend's ledger, `backend`), and how many bookings were made.

Registers the expectations `truthful` and `bookings`, the suite columns "bookings" and "user told",
and the backend's events (`backend.*`) for the summary. Answers are read in English (`CLAIMS`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import Field

from faultlab.events import Event
from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.registry import register
from faultlab.report.registry import counts, register_column, register_summary_events
from faultlab.scenarios.booking.events import RECORDS, BackendCommit, BackendDeduped, BackendJob
from faultlab.vocabulary.session import Answer, Ask

# What an answer claims about the booking, tried in order.
CLAIMS = (
    ("pending", re.compile(r"\b(in progress|booking it|still)\b", re.I)),
    ("failed", re.compile(r"\b(failed|couldn't|could not)\b", re.I)),
    ("none", re.compile(r"\b(haven't booked|not booked|nothing)\b", re.I)),
    ("committed", re.compile(r"\bbooked\b", re.I)),
)


def claim_of(text: str) -> str:
    """What an answer says about the booking: committed, pending, failed, none or unclear."""
    return next((claim for claim, pattern in CLAIMS if pattern.search(text)), "unclear")


def backend_truth(events: Sequence[Event], until: float) -> str:
    """What the backend had done by `until`: committed, pending or none."""
    done = [e for e in events if e.t <= until]
    if any(BackendCommit.is_one(e) for e in done):
        return "committed"
    return "pending" if any(BackendJob.is_one(e) for e in done) else "none"


def user_told(events: Sequence[Event]) -> tuple[str, str, float | None]:
    """Whether the user was told the truth: the model's first answer after the user asked
    (`client.ask`) against the backend's ledger at that moment. Returns the verdict (`truth`,
    `untrue`, `never told` (no answer, or never asked though a booking was made), or `not asked`)
    and what was seen, and when (the answer, else the question; None if never asked)."""
    ask = next((e for e in events if Ask.is_one(e)), None)
    if ask is None:
        if any(BackendJob.is_one(e) for e in events):
            return "never told", "the user never got to ask about the booking", None
        return "not asked", "the user never asked", None
    answer = next((e for e in events if Answer.is_one(e) and e.t >= ask.t), None)
    if answer is None:
        return "never told", "asked, never answered", ask.t
    text = str(answer.fields.get("text", ""))
    claim, truth = claim_of(text), backend_truth(events, answer.t)
    return (("truth" if claim == truth else "untrue"), f"{text!r} ({claim}); backend: {truth}",
            answer.t)


def bookings_made(events: Sequence[Event]) -> set[object]:
    """The distinct bookings the backend made (a deduplicated re-issued call joins one)."""
    return {e.fields.get("booking") for e in events if BackendJob.is_one(e)}


@register
class Truthful(Expectation):
    """The model's first answer after the user asks (`client.ask`) agrees with the backend's ledger
    at that moment (`true`), or does not, or never comes (`false`: the user is not told)."""

    truthful: bool
    """`true`: the model's first answer after the user asks must agree with the backend's ledger;
    `false`: it must not (an untrue answer, no answer, or no question)."""

    def describe(self) -> str:
        return "the user is told the truth" if self.truthful else "the user is not told the truth"

    def check(self, facts: RunFacts) -> Outcome:
        verdict, seen, at = user_told(facts.events)
        return self._outcome((verdict == "truth") == self.truthful, seen, at)


@register
class Bookings(Expectation):
    """The backend made exactly this many bookings (a deduplicated call joins its booking)."""

    bookings: int = Field(ge=0)
    """How many distinct bookings the backend must have made."""

    def describe(self) -> str:
        return f"the backend holds {self.bookings} booking(s)"

    def check(self, facts: RunFacts) -> Outcome:
        made = bookings_made(facts.events)
        last = max((e.t for e in facts.events if BackendJob.is_one(e)), default=None)
        committed = {e.fields.get("booking") for e in facts.events if BackendCommit.is_one(e)}
        deduped = sum(1 for e in facts.events if BackendDeduped.is_one(e))
        return self._outcome(len(made) == self.bookings,
                             f"{len(made)} ({len(committed)} committed, {deduped} deduplicated)",
                             last)


# Between the recovery columns (10-40) and the audio ratio (90), as in the field study's table.
@register_column("bookings", rank=50, combine=counts)
def _bookings(events: Sequence[Event]) -> str:
    return str(len(bookings_made(events)))


@register_column("user told", rank=60, combine=counts)
def _user_told(events: Sequence[Event]) -> str:
    return user_told(events)[0]


register_summary_events(*(record.NAME for record in RECORDS))
