"""The emulator's "model": declarative rules from the user's words to tool calls and replies.

A rule is a pattern on what the user said and a response that may read the session: the
conversation so far, the tool calls made and their results, and the instructions it was given.
The default brain (`echo`) knows no scenario; a scenario pack brings its own (faultlab.scenarios),
which a personality's `scenario` names.

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


def tool_done(call: CallRecord, mind: Mind) -> Reply:
    """The neutral word on any tool's result."""
    return Reply(f"{call.name} is done.")


def echo_words(text: str, mind: Mind) -> Reply:
    """The neutral fallback: repeat (the start of) what the user said."""
    words = " ".join(text[: ECHO_CHARS * 4].split()[:ECHO_WORDS])[:ECHO_CHARS]
    return Reply(f"You said: {words}" if words else "I didn't catch that.")


def echo() -> Brain:
    """The emulator's neutral model, knowing no scenario: it repeats what it heard and says a
    tool is done. A scenario pack gives a model of its own (`faultlab.scenarios`)."""
    return Brain([], tool_done, echo_words)
