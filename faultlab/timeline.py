"""When steps fire: triggers watch the run's events and say when each step is due.

Sans-I/O: `Timeline` takes events and returns the steps that became due, with their due time on
the run clock; the runner sleeps until then and applies the fault. Each step fires at most once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from faultlab.events import Event
from faultlab.kinds import frame_sender, kind_matches
from faultlab.profile import Step

# The events the runner emits when a step has fired; `when: {step: ID}` waits for this.
STEP_APPLIED = "fault.applied"


@dataclass(frozen=True)
class Due:
    """A step that is due at `t` (run clock), and what triggered it."""

    step: Step
    t: float
    cause: str


class Timeline:
    """The profile's steps, waiting for their triggers."""

    def __init__(self, steps: Iterable[Step]) -> None:
        self.steps = list(steps)
        self._waiting = {s.id: s for s in self.steps}
        self._frames_seen: dict[str, int] = {}

    @property
    def waiting(self) -> list[Step]:
        """Steps whose trigger has not happened (yet)."""
        return list(self._waiting.values())

    def start(self) -> list[Due]:
        """Steps with a time trigger, due from the run's start."""
        out = []
        for step in self.steps:
            if step.when.at is not None:
                out.append(Due(step, step.when.at + step.after, step.when.describe()))
                del self._waiting[step.id]
        return out

    def observe(self, event: Event) -> list[Due]:
        """Steps whose trigger `event` is; each is due `after` its trigger."""
        out = []
        for step in list(self._waiting.values()):
            if _triggers(step, event, self._frames_seen):
                out.append(Due(step, event.t + step.after, step.when.describe()))
                del self._waiting[step.id]
        return out


def _triggers(step: Step, event: Event, counts: dict[str, int]) -> bool:
    when = step.when
    if when.frame is not None:
        frame = when.frame
        sender = frame_sender(event)
        if sender is None or frame.sender not in ("either", sender):
            return False
        k = event.fields.get("k", event.fields.get("conn"))
        if frame.connection is not None and k != frame.connection:
            return False
        if frame.kind and not kind_matches(str(event.fields.get("kind", "")), frame.kind):
            return False
        counts[step.id] = counts.get(step.id, 0) + 1
        return counts[step.id] == frame.nth
    if when.step is not None:
        return event.matches(STEP_APPLIED, {"step": when.step})
    if when.event is not None:
        return event.matches(when.event, when.where)
    if when.connection is not None:
        return event.matches("tcp.connect", {"k": when.connection})
    return False
