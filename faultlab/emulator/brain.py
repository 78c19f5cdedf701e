"""The emulator's "model": declarative rules from the user's words to tool calls and replies.

A rule is a pattern on what the user said and a response that may read the session: the
conversation so far, the tool calls made and their results, and the instructions it was given.
The default brain is the field study's booking assistant (docs/field-scenarios.md).

A user turn may come in parts (`clientContent` with `turnComplete: false`, then more): the
model answers every part said since its last reply. A part with no words (an empty turn, " ",
".") is a nudge to go on, not a question: it gets the unanswered parts answered, or nothing.

A session keeps a bounded conversation (`CONTEXT_CHARS`), and every rule's pattern runs in time
linear in what it reads (no unbounded gap between two words), however long a turn is.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PLACEHOLDER = re.compile(r"[\W_]*")
# What a session keeps of its conversation, in characters (of instructions, and of turns as
# `context_text` spells them): about the 128k-token context window of the native-audio Live
# models at 4 characters a token. Past it the oldest turns go first, as with the service's
# sliding-window compression, and a longer turn keeps its end; instructions have the same budget.
CONTEXT_CHARS = 512 * 1024
# What the fallback repeats of the user's words (a reply must stay small: the SDK's inbound limit
# is 1 MiB, and the reply's speech is synthesised and cached).
ECHO_WORDS, ECHO_CHARS = 12, 120


def is_placeholder(text: str) -> bool:
    """Whether a user part says nothing (whitespace or punctuation: a client's nudge)."""
    return PLACEHOLDER.fullmatch(text) is not None


@dataclass(frozen=True)
class PlannedCall:
    name: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Reply:
    """What the model does next: say something, call tools, or both (calls first)."""

    speech: str | None = None
    calls: tuple[PlannedCall, ...] = ()

    @staticmethod
    def joined(replies: Sequence[Reply]) -> Reply:
        """Several replies as one turn: every call, then every speech in order."""
        speech = " ".join(r.speech for r in replies if r.speech)
        return Reply(speech or None, tuple(c for r in replies for c in r.calls))


@dataclass
class CallRecord:
    id: str
    name: str
    args: Mapping[str, Any]
    non_blocking: bool
    result: Mapping[str, Any] | None = None


@dataclass
class Mind:
    """What the model knows in a session (a resume restores it): the instructions it was given,
    the conversation as (role, text) turns, and its tool calls. Instructions and turns are added
    with `instruct` and `say`, which keep each within CONTEXT_CHARS."""

    # The functions it may call, each with its declared behavior (None: the model's default).
    declared: dict[str, str | None] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    instructions: deque[str] = field(default_factory=deque)
    turns: deque[tuple[str, str]] = field(default_factory=deque)
    dropped_chars: int = 0  # forgotten past CONTEXT_CHARS, over the session
    _instruction_chars: int = field(default=0, init=False, repr=False)
    _turn_chars: int = field(default=0, init=False, repr=False)

    def instruct(self, text: str) -> None:
        text = self._fit(text)
        self.instructions.append(text)
        self._instruction_chars += len(text) + 1
        while self._instruction_chars > CONTEXT_CHARS:
            self._instruction_chars -= self._forget(len(self.instructions.popleft()) + 1)

    def say(self, turns: Iterable[tuple[str, str]]) -> None:
        """Turns (role, text) join the conversation."""
        for role, text in turns:
            self._add_turn(len(self.turns), role, text)

    def add_model_turn(self, text: str, before_last: int = 0) -> None:
        """The model's turn, placed before the last `before_last` turns: parts it did not
        answer, which stay unanswered."""
        self._add_turn(len(self.turns) - before_last, "model", text)

    def waiting(self) -> int:
        """How many turns at the end are the user's, with no model turn after them."""
        count = 0
        for role, _ in reversed(self.turns):
            if role != "user":
                break
            count += 1
        return count

    def _add_turn(self, index: int, role: str, text: str) -> None:
        text = self._fit(text, len(role) + 3)
        self.turns.insert(index, (role, text))
        self._turn_chars += len(role) + len(text) + 3
        while self._turn_chars > CONTEXT_CHARS:
            role, text = self.turns.popleft()
            self._turn_chars -= self._forget(len(role) + len(text) + 3)

    def _fit(self, text: str, overhead: int = 1) -> str:
        """The end of a text that would fill the budget by itself."""
        room = CONTEXT_CHARS - overhead
        if len(text) <= room:
            return text
        self._forget(len(text) - room)
        return text[-room:]

    def _forget(self, chars: int) -> int:
        self.dropped_chars += chars
        return chars

    def calls_named(self, name: str) -> list[CallRecord]:
        return [c for c in self.calls if c.name == name]

    def context_text(self) -> str:
        return "\n".join([*self.instructions, *(f"{role}: {text}" for role, text in self.turns)])

    def unanswered(self, held_back: int = 0) -> list[str]:
        """The user's parts since the model last spoke or called, nudges left out, and the last
        `held_back` turns too (sent after the turn being answered ended)."""
        parts: list[str] = []
        for role, text in list(self.turns)[:len(self.turns) - held_back]:
            if role != "user":
                parts = []
            elif not is_placeholder(text):
                parts.append(text)
        return parts


Respond = Callable[[re.Match[str], Mind], Reply]


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    respond: Respond


class Brain:
    """Rules tried in order on each user turn; `on_result` speaks about a tool's result."""

    def __init__(self, rules: Sequence[Rule], on_result: Callable[[CallRecord, Mind], Reply],
                 fallback: Callable[[str, Mind], Reply]) -> None:
        self.rules = list(rules)
        self._on_result = on_result
        self._fallback = fallback

    def on_turn(self, mind: Mind, held_back: int = 0) -> Reply | None:
        """The reply to the user's unanswered parts (None: nothing to answer), leaving out the
        last `held_back` turns. The last part is read first (a question after a restored
        transcript), then all of them as one request (a request sent in pieces)."""
        parts = mind.unanswered(held_back)
        if not parts:
            return None
        for text in dict.fromkeys((parts[-1], " ".join(parts))):
            for rule in self.rules:
                match = rule.pattern.search(text)
                if match is not None:
                    return rule.respond(match, mind)
        return self._fallback(" ".join(parts), mind)

    def on_result(self, call: CallRecord, mind: Mind) -> Reply:
        return self._on_result(call, mind)


# The booking assistant. A gap between two words is bounded (`.{0,GAP}`): with `.*` a turn of
# "book book_slot ..." took time growing with the square of its length (9.5 s for 120,000
# characters; 0.03 s bounded), and a search holds the one event loop every connection shares.
GAP = 200
# The day may come before the hour or after it ("today at 3pm", "3pm tomorrow").
BOOK = re.compile(rf"\bbook\b.{{0,{GAP}}}?(?:\b(?P<day_first>today|tomorrow)\b.{{0,{GAP}}}?)?"
                  rf"\b(?P<hour>\d{{1,2}})\s*(?P<ampm>am|pm)\b"
                  rf"(?:.{{0,{GAP}}}?\b(?P<day>today|tomorrow)\b)?", re.I)
ASK = re.compile(r"\b(did|have) you (book|booked)\b|\bis it booked\b", re.I)
STATUS_DONE = re.compile(rf"book_slot\b.{{0,{GAP}}}\b(committed|booked|confirmed|done)\b", re.I)
STATUS_FAILED = re.compile(rf"book_slot\b.{{0,{GAP}}}\b(failed|error|rejected)\b", re.I)
# A client's status line about a side effect (what field-recovery restores a new session with).
STATUS_LINE = re.compile(r"^\[status\] (?P<name>\w+)\((?P<args>[^)]{0,120})\): (?P<status>\w+)")


def _slot(match: re.Match[str]) -> str:
    day = match.group("day_first") or match.group("day") or "tomorrow"
    return f"{day} at {match.group('hour')}{match.group('ampm').lower()}"


def _book(match: re.Match[str], mind: Mind) -> Reply:
    slot = _slot(match)
    if STATUS_DONE.search(mind.context_text()):
        return Reply(f"Your slot {slot} is already booked.")
    if "book_slot" not in mind.declared:
        return Reply("I can't book slots in this session.")
    return Reply(calls=(PlannedCall("book_slot", {"slot": slot}),))


def _succeeded(result: Mapping[str, Any] | None) -> bool:
    return result is not None and "error" not in result and result.get("status") != "failed"


def _asked(match: re.Match[str], mind: Mind) -> Reply:
    calls = mind.calls_named("book_slot")
    done = [c for c in calls if c.result is not None]
    if done:
        last = done[-1]
        if _succeeded(last.result):
            return Reply(f"Yes, your slot {last.args.get('slot', '')} is booked.".replace("  ", " "))
        return Reply("No, the booking failed.")
    if calls:
        return Reply("I'm booking it now; it's still in progress.")
    context = mind.context_text()
    if STATUS_DONE.search(context):
        return Reply("Yes, it's booked.")
    if STATUS_FAILED.search(context):
        return Reply("No, the booking failed.")
    earlier = BOOK.search(context)
    if earlier is not None and "book_slot" in mind.declared:
        # A new session restored from a transcript without the booking's status: the model
        # books again, with the slot in slightly other words (T5's drift).
        slot = _slot(earlier).replace(" at ", " ")
        return Reply("I'm booking it now.", calls=(PlannedCall("book_slot", {"slot": slot}),))
    return Reply("I haven't booked anything yet.")


def _status(match: re.Match[str], mind: Mind) -> Reply:
    """A restored session told what a side effect's status is: the model says where it stands."""
    what = match.group("args")
    status = match.group("status").lower()
    if status in ("committed", "booked", "confirmed", "done"):
        return Reply(f"Your slot {what} is booked.")
    if status in ("failed", "error", "rejected"):
        return Reply(f"Sorry, booking {what} failed.")
    return Reply(f"I'm still booking your slot {what}; I'll tell you when it's done.")


def _result(call: CallRecord, mind: Mind) -> Reply:
    if call.name == "book_slot":
        if _succeeded(call.result):
            return Reply(f"Done: your slot {call.args.get('slot', '')} is booked.")
        return Reply("Sorry, I couldn't book that slot.")
    return Reply(f"{call.name} is done.")


def _fallback(text: str, mind: Mind) -> Reply:
    words = " ".join(text[: ECHO_CHARS * 4].split()[:ECHO_WORDS])[:ECHO_CHARS]
    return Reply(f"You said: {words}" if words else "I didn't catch that.")


def booking_assistant() -> Brain:
    return Brain([Rule(STATUS_LINE, _status), Rule(ASK, _asked), Rule(BOOK, _book)], _result,
                 _fallback)
