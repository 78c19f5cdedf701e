"""A connection's outbox: the frames and closes the sans-I/O core has scheduled, by when they are due."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faultlab.emulator.messages import Frame


@dataclass(order=True)
class Action:
    """A frame to send (`frame`) or a close (`code`, `reason`, and for its `ServerClose`, told
    as it is sent, `why` and `detail`), due at `at`; or, internal to the core, the moment the
    model answers the user's turn (`think`)."""

    at: float
    seq: int
    frame: Frame | None = field(default=None, compare=False)
    code: int = field(default=0, compare=False)
    reason: str = field(default="", compare=False)
    turn: int = field(default=0, compare=False)
    audio_s: float = field(default=0.0, compare=False)
    think: bool = field(default=False, compare=False)
    # A frame's payload exactly as it is to be sent (a cassette's: faultlab.cassette.replay),
    # instead of `frame`; bytes go in a binary frame.
    wire: str | bytes | None = field(default=None, compare=False)
    why: str = field(default="", compare=False)
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def closes(self) -> bool:
        """Whether it is a close (not a frame, nor a moment to think)."""
        return self.frame is None and self.wire is None and not self.think


class Outbox:
    """Actions in the order they fall due; those due at the same time in the order scheduled."""

    def __init__(self) -> None:
        self._due: list[Action] = []  # a heap
        self._seq = itertools.count()

    def send(self, at: float, frame: Frame, turn: int = 0, audio_s: float = 0.0) -> None:
        """`frame` at `at`, as part of the model's turn `turn` (0: no turn's)."""
        heapq.heappush(self._due, Action(at, next(self._seq), frame, turn=turn, audio_s=audio_s))

    def send_wire(self, at: float, wire: str | bytes) -> None:
        """A payload to send as it is, at `at`."""
        heapq.heappush(self._due, Action(at, next(self._seq), wire=wire))

    def close(self, at: float, code: int, reason: str, why: str,
              detail: Mapping[str, Any] | None = None) -> Action:
        action = Action(at, next(self._seq), None, code, reason, why=why, detail=detail or {})
        heapq.heappush(self._due, action)
        return action

    def mark(self) -> int:
        """A mark of what is scheduled by now, for `unsay`."""
        return next(self._seq)

    def unsay(self, mark: int) -> None:
        """Every frame scheduled since `mark` is dropped; closes and thinking stay."""
        self._due = [a for a in self._due if a.seq < mark or a.closes or a.think]
        heapq.heapify(self._due)

    def think(self, at: float) -> Action:
        """The moment the model answers, at `at` (withdrawn with `withdraw`)."""
        action = Action(at, next(self._seq), think=True)
        heapq.heappush(self._due, action)
        return action

    def withdraw(self, action: Action) -> None:
        if action in self._due:
            self._due.remove(action)
            heapq.heapify(self._due)

    def cut_turns(self) -> None:
        """Every frame of a model's turn is dropped (a barge-in cut them); the rest stays."""
        self._due = [a for a in self._due if a.turn == 0]
        heapq.heapify(self._due)

    def clear(self) -> None:
        self._due.clear()

    def next_at(self) -> float | None:
        return self._due[0].at if self._due else None

    def pop_due(self, now: float) -> Action | None:
        """The first action due by `now`, if any, taken out."""
        if self._due and self._due[0].at <= now:
            return heapq.heappop(self._due)
        return None
