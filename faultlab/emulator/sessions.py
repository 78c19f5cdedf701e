"""The session registry: what each resumption handle restores, and when handles die.

A session is what a resumption handle restores across connections (the model's state). Its
handles die when it is reaped (L7) or 2 hours (`handle_ttl_s`) after its connection ended,
whether or not anyone connects again; a dead handle is told from one never issued (S5) until
DEAD_HANDLES_KEPT newer ones died.
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from faultlab.emulator.brain import Mind
from faultlab.emulator.messages import Setup

DEAD_HANDLES_KEPT = 10_000


class Holder(Protocol):
    """The connection that holds a session, as the registry and a resuming connection see it."""

    number: int
    closed: bool

    def holds(self, now: float) -> bool: ...


@dataclass
class Session:
    """What a resumption handle restores: the model's state across connections."""

    id: str
    setup: Setup
    mind: Mind
    handles: set[str] = field(default_factory=set)
    holder: Holder | None = None
    dropped_at: float | None = None
    dropped_speaking: bool = False
    last_activity: float = 0.0
    dead: bool = False
    consumed: int = 0
    cut_speech: str | None = None  # what a drop cut short, partly repeated on resume (R6)


class Handles:
    """The resumption handles one emulator issued: the live session each restores (`sessions`),
    and the handles that died (`dead`)."""

    def __init__(self, ttl: float, rng: random.Random) -> None:
        self.ttl = ttl  # how long a handle outlives its session's connection, time-scaled
        self.rng = rng
        self.sessions: dict[str, Session] = {}
        # Handles of reaped or expired sessions (S5 tells them from handles never issued); the
        # oldest are forgotten past DEAD_HANDLES_KEPT.
        self.dead: dict[str, None] = {}
        # When to look at a session with handles again: its connection ended, or it may be
        # reaped (a heap; a session resumed since is looked at and left alone).
        self._checks: list[tuple[float, int, Session]] = []
        self._seq = itertools.count()

    def issue(self, session: Session) -> str:
        handle = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        session.handles.add(handle)
        self.sessions[handle] = session
        return handle

    def expired(self, session: Session, now: float) -> bool:
        """Dead, or dropped longer ago than a handle lives (2 hours after the session ended)."""
        return session.dead or (
            session.holder is None and session.dropped_at is not None
            and now >= self.end(session.dropped_at))

    def end(self, dropped_at: float) -> float:
        """When the handles of a session dropped at `dropped_at` die, unless it is resumed."""
        return dropped_at + self.ttl

    def check_at(self, session: Session, at: float) -> None:
        """Look at `session` again at `at` (its handles may die then)."""
        if session.handles:
            heapq.heappush(self._checks, (at, next(self._seq), session))

    def next_due(self) -> float | None:
        """When a session's handles may die next (None: no session has handles to lose)."""
        return self._checks[0][0] if self._checks else None

    def forget_dead(self, now: float) -> int:
        """Forget the sessions whose handles died by `now` (their handles become dead handles);
        how many."""
        forgotten = 0
        while self._checks and self._checks[0][0] <= now:
            _, _, session = heapq.heappop(self._checks)
            holder = session.holder
            if holder is not None and holder.closed:
                holder.holds(now)  # a connection held past its TCP's end is reaped by now
            if self.expired(session, now) and session.handles:
                self._forget(session)
                forgotten += 1
        return forgotten

    def _forget(self, session: Session) -> None:
        for handle in session.handles:
            self.sessions.pop(handle, None)
            self.dead[handle] = None
        session.handles = set()
        # Past DEAD_HANDLES_KEPT the oldest dead handles count as never issued (1007, not S5's
        # 1011 or silence): a memory bound, not a measured behaviour.
        while len(self.dead) > DEAD_HANDLES_KEPT:
            del self.dead[next(iter(self.dead))]
