"""The client's side of the booking conversation, which the builtin clients (faultlab/clients/) hold.

It asks for the booking (`--say`), hands each tool call to the backend (`backend`), and answers the
call (by its id, on whatever connection of its session is up) when the backend commits. Once every
booking has committed (or, with none, once the model has replied) it asks `--ask`; the user has
been told once the model answers that. A new session is restored with the request and one status
line per booking (`restore`), and a call its old session made is reported to the new one
(`outlived`) when status notes are on.

What the Python and the JavaScript clients must agree on (the phrases, the tool, the status line's
wording, the timing defaults, the model names, the exit codes) is declared once, in
conversation.json beside this module, read by script.py (`SCRIPT`) and by clients/js/script.mjs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, Protocol

from faultlab.events import EventWriter
from faultlab.scenarios.booking.backend import Booking, BookingBackend, run_ledger
from faultlab.scenarios.booking.script import SCRIPT
from faultlab.units import parse_duration
from faultlab.vocabulary.session import Ask, StatusNote, ToolResponse

# A user's turn: (role, text).
Turn = tuple[str, str]


class Line(Protocol):
    """What the conversation needs of the client: its connection's state, and a way to speak."""

    up: asyncio.Event
    lost: asyncio.Event
    session: Any
    generation: int  # which session is in use: a new session cannot answer an old one's calls

    async def say(self, turns: list[Turn], turn_complete: bool) -> None: ...

    async def answer_call(self, call_id: str, name: str, response: dict[str, Any]) -> None:
        """Send a function's result (raises when the connection cannot take it)."""

    async def drop(self, why: str) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The conversation's options."""
    p.add_argument("--say", default=SCRIPT.say)
    p.add_argument("--ask", default=SCRIPT.ask, help="the question ('' for none)")
    p.add_argument("--ask-after", type=parse_duration, default=SCRIPT.defaults_s["ask_after"],
                   help="how long after the booking commits (or the model replies) to ask")
    p.add_argument("--no-answer", dest="answer", action="store_false",
                   help="never send the tool response (field R2)")
    p.add_argument("--respond-delay", type=parse_duration, default=0.0,
                   help="how long after the backend commits to send the tool response")
    p.add_argument("--tool-response-bytes", type=int, default=0,
                   help="pad the tool response with this many bytes of detail (a large tool "
                        "result, as an MTU black hole swallows)")


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--commit", type=parse_duration, default=4.0, help="backend job length")
    p.add_argument("--time-scale", type=float, default=1.0, help="factor on the backend's job")


class Restored(NamedTuple):
    """A new session's restoring turns: whether the user asked in them, how many status lines
    they hold, and whether they end the user's turn (the model is to reply)."""

    turns: list[Turn]
    ask: bool
    lines: int
    reply: bool


class BookingConversation:
    def __init__(self, line: Line, args: argparse.Namespace, events: EventWriter,
                 status_notes: bool = False) -> None:
        self.line = line
        self.args = args
        self.events = events
        self.status_notes = status_notes
        self.backend = BookingBackend(args.commit, args.time_scale, run_ledger(), events)
        self.answered = asyncio.Event()
        self.asked = False
        self.replied = False

    def opening(self) -> list[Turn]:
        return [("user", self.args.say)]

    def on_call(self, call_id: str, name: str, args: dict[str, Any]) -> None:
        """A tool call: the backend books (or joins) at once; the call is answered on commit."""
        booking = self.backend.book(call_id, str(args.get("slot", "")))
        self.line.spawn(self._respond(call_id, name, booking))

    def on_reply(self) -> None:
        """The model finished a turn with words: a reply, and the answer if the user had asked."""
        self.replied = True
        if self.asked:
            self.answered.set()

    async def _respond(self, call_id: str, name: str, booking: Booking) -> None:
        """Answer a call by its id once the backend has committed, on whatever connection of its
        session is up; a call whose session is gone is `outlived`."""
        born = self.line.generation
        await self.backend.committed(booking)
        if not self.args.answer:
            return
        await asyncio.sleep(self.args.respond_delay)
        while True:
            await self.line.up.wait()
            if self.line.generation != born:
                await self.outlived(booking)
                return
            try:
                await self.line.answer_call(call_id, name, self._response(booking))
                self.events.announce(ToolResponse(call_id, booking.id))
                return
            except Exception:
                await self.line.drop("send failed")

    def _response(self, booking: Booking) -> dict[str, Any]:
        response: dict[str, Any] = {"status": booking.status, "booking": booking.id}
        if self.args.tool_response_bytes:
            response["detail"] = "x" * self.args.tool_response_bytes
        return response

    async def outlived(self, booking: Booking) -> None:
        """A call's session was replaced by a new one, which cannot answer it: with status notes,
        the new session is told what happened (the update note)."""
        if self.status_notes:
            with contextlib.suppress(Exception):
                await self.line.say([("user", booking.status_line())], turn_complete=False)
                self.events.announce(StatusNote(booking.id, booking.status))

    def restore(self) -> Restored:
        """What a new session is told: the request, one status line per booking (with status
        notes), and the question when its answer is known."""
        lines = self.backend.status_lines() if self.status_notes else []
        turns = [("user", self.args.say), *(("user", line) for line in lines)]
        ask = self.ask_due(speaking=False)
        if ask:
            turns.append(("user", self.args.ask))
        # A request the model never answered is owed a reply too: `faultlab explore` found a
        # session lost before its tool call arrived restored with the turn left open, and the
        # model waiting for the rest of it (no booking, the user never told).
        return Restored(turns, ask, len(lines), ask or bool(lines) or not self.replied)

    def ask_due(self, speaking: bool) -> bool:
        """Time to ask: the model is not speaking, and every booking has committed, or (none
        asked for) the model has replied."""
        if self.asked or not self.args.ask or speaking:
            return False
        bookings = self.backend.ledger.bookings
        if bookings:
            return all(b.status == "committed" for b in bookings)
        return self.replied

    def mark_asked(self) -> None:
        self.asked = True
        self.answered.clear()
        self.events.announce(Ask(self.args.ask))

    async def ask(self, speaking: Callable[[], bool]) -> None:
        """Ask `--ask-after` from now, unless the connection is lost meanwhile (handled first);
        `speaking()` says whether a model turn is under way then."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.line.lost.wait(), self.args.ask_after)
        if self.line.up.is_set() and self.ask_due(speaking()):
            with contextlib.suppress(Exception):
                await self.line.say([("user", self.args.ask)], turn_complete=True)
                self.mark_asked()

    def done(self) -> bool:
        """The user has the answer (or, asking nothing, the model's reply)."""
        return self.answered.is_set() or (self.replied and not self.args.ask)

    def close(self) -> None:
        self.backend.close()
