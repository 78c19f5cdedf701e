"""When steps fire: triggers watch the run's events and frames and say when each step is due.

Sans-I/O: `Timeline` takes events and frames and returns the steps that became due, with their
due time on the run clock; the run sleeps until then and applies the fault. Each step fires at
most once. Time triggers (`at`) count from the client's start, the first moment a profile's
author can reason about: the lab, the target and the proxy take longer on a loaded machine, but
they are all ready before the client starts.

Steps whose fault lives in the proxy and that fire on a frame are armed in the proxy instead
(`armed`), which fires them inside its message hook: the timeline never fires them, and they
wait here until their `fault.applied` comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from faultlab.events import Event, KindMatch
from faultlab.frames import Frame, FrameWatch
from faultlab.profile import Step
from faultlab.vocabulary.run import FaultApplied, TcpConnect


def in_proxy(step: Step) -> bool:
    """Whether the proxy fires this step: it fires on a frame, and its fault lives there."""
    return step.when.frame is not None and "proxy" in step.needs


@dataclass(frozen=True)
class Due:
    """A step that is due at `t` (run clock), and what triggered it."""

    step: Step
    t: float
    cause: str


class Timeline:
    """The profile's steps, waiting for their triggers."""

    def __init__(self, steps: Iterable[Step], kinds: KindMatch | None = None) -> None:
        """`kinds`: the run's protocol's `kind_matches`, for `when: {event, where: {kind}}`."""
        every = list(steps)
        self.kinds = kinds
        # The proxy's to fire (faultlab.injector arms them); the others are this timeline's.
        self.armed = [s for s in every if in_proxy(s)]
        self.steps = [s for s in every if not in_proxy(s)]
        # The armed steps too: whether they fired, only their `fault.applied` tells.
        self._waiting = {s.id: s for s in every}
        self._watches = {s.id: FrameWatch(s.when.frame) for s in self.steps
                         if s.when.frame is not None}

    @property
    def waiting(self) -> list[Step]:
        """Steps whose trigger has not happened (yet), as far as the timeline knows."""
        return list(self._waiting.values())

    def unfired(self, events: Iterable[Event]) -> list[str]:
        """The ids of the steps that never applied their fault though their trigger might have
        come: those still waiting (the armed ones among them)."""
        applied = {a.step for _, a in FaultApplied.all(events)}
        return [step for step in self._waiting if step not in applied]

    def start(self, client_started: float) -> list[Due]:
        """Steps with a time trigger, due from the client's start."""
        out = []
        for step in self.steps:
            if step.when.at is not None:
                out.append(Due(step, client_started + step.when.at + step.after,
                               step.when.describe()))
                del self._waiting[step.id]
        return out

    def observe(self, event: Event) -> list[Due]:
        """Steps whose trigger `event` is; each is due `after` its trigger."""
        return self._fire(event.t, lambda step: _triggers(step, event, self.kinds))

    def observe_frame(self, frame: Frame, t: float) -> list[Due]:
        """Steps whose frame trigger this frame (seen at `t`) completes: its n-th match."""
        return self._fire(t, lambda step: step.id in self._watches
                          and self._watches[step.id].offer(frame))

    def _fire(self, t: float, fires: Callable[[Step], bool]) -> list[Due]:
        out = []
        for step in [s for s in self.steps if s.id in self._waiting]:
            if fires(step):
                out.append(Due(step, t + step.after, step.when.describe()))
                del self._waiting[step.id]
        return out


def _triggers(step: Step, event: Event, kinds: KindMatch | None) -> bool:
    when = step.when
    if when.step is not None:
        applied = FaultApplied.read(event)
        return applied is not None and applied.step == when.step
    if when.event is not None:
        return event.matches(when.event, when.where, kinds)
    if when.connection is not None:
        connect = TcpConnect.read(event)
        return connect is not None and connect.k == when.connection
    return False
