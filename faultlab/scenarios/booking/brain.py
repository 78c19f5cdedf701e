"""The booking pack's model for the emulator: the field study's booking assistant.

It calls `book_slot` for "book ... 3pm tomorrow", answers "Did you book it?" from its tool calls
and their results (or from a restored session's status lines), and speaks about the result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from faultlab.emulator.brain import Brain, CallRecord, Mind, PlannedCall, Reply, Rule, echo_words, tool_done

# A gap between two words is bounded (`.{0,GAP}`): with `.*` a turn of
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
    return tool_done(call, mind)


def booking_assistant() -> Brain:
    return Brain([Rule(STATUS_LINE, _status), Rule(ASK, _asked), Rule(BOOK, _book)], _result,
                 echo_words)
