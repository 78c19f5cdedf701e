"""Session resumption and its lockout: what a connection that asks to resume a session with a
handle gets, the session or a refusal, and how long an ended connection still holds its session.

A handle never issued is an invalid argument (1007); a dead one (its session reaped, or its
handles expired) is refused 1011 or left unanswered (S5). A live session is refused 1011 while
another connection holds it (L1), which one whose TCP gave up still does until it would have been
reaped (L8), and for a while after an idle drop (the release window); else it is resumed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from faultlab.emulator.personality import INTERNAL_ERROR, INVALID_ARGUMENT, Personality
from faultlab.emulator.sessions import Handles, Session
from faultlab.vocabulary.server import EmulatorResumeRefused


@dataclass(frozen=True)
class Refusal:
    """How a resume is refused: closed `code` `reason` after a delay drawn from `delay` (code
    None: left unanswered, S5), `why` (the close's), and told by `told` (None: an unknown
    handle, an invalid argument like any other)."""

    code: int | None
    reason: str
    delay: tuple[float, float]
    why: str
    told: EmulatorResumeRefused | None = None


def resumption(handles: Handles, handle: str, now: float, p: Personality, rng: random.Random,
               scaled: Callable[[float], float], conn: int) -> Session | Refusal:
    """What connection `conn` asking at `now` to resume with `handle` gets."""
    session = handles.sessions.get(handle)
    # Asked first: a connection held past its TCP's end may be reaped now, killing the handle.
    holder = session.holder if session is not None else None
    held = holder is not None and holder.holds(now)
    if session is None and handle not in handles.dead:
        return Refusal(1007, INVALID_ARGUMENT, p.invalid_argument_s, "unknown handle")
    if session is None or handles.expired(session, now):
        if rng.random() < p.dead_handle_silent:
            return Refusal(None, "", p.refusal_s, "resume refused: dead handle",
                           EmulatorResumeRefused(conn=conn, why="dead handle", answered=False))
        return Refusal(1011, INTERNAL_ERROR, p.refusal_s, "resume refused: dead handle",
                       EmulatorResumeRefused(conn=conn, why="dead handle"))
    why = None
    if held and holder is not None:
        why = f"the old connection {holder.number} is still " + (
            "held (its TCP gave up)" if holder.closed else "open")
    elif (session.dropped_at is not None and not session.dropped_speaking
          and session.dropped_at - session.last_activity <= scaled(p.release_after_activity_s)
          and now - session.dropped_at < scaled(p.release_window_s)):
        why = f"idle drop {now - session.dropped_at:.3f}s ago"
    if why is not None:
        return Refusal(1011, INTERNAL_ERROR, p.refusal_s, f"resume refused: {why}",
                       EmulatorResumeRefused(conn=conn, session=session.id, why=why))
    return session


def reaped_at(last_client_msg: float, p: Personality, scaled: Callable[[float], float]) -> float:
    """When a connection silent since `last_client_msg` is reaped (L7), or one held past its
    TCP's end stops holding its session, which dies (L8)."""
    return last_client_msg + scaled(p.reap_after_s)
