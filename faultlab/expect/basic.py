"""Expectations on any run: exit codes, counts of events, events in a window, live processes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.registry import register
from faultlab.model import Duration, EventMatch
from faultlab.vocabulary.run import ProcessExit

ProcessRole = Literal["client", "target"]


@register
class ExitCode(Expectation):
    """The client (or target) exited with this code."""

    exit_code: int
    """The exit code the process must end with; a process still running at the end, or never
    started, fails."""
    process: ProcessRole = "client"
    """Whose exit code: `client` or `target`."""

    def describe(self) -> str:
        return f"{self.process} exits with {self.exit_code}"

    def check(self, facts: RunFacts) -> Outcome:
        code = facts.exit_codes.get(self.process)
        seen = "never started" if self.process not in facts.exit_codes else (
            "still running at the end" if code is None else f"exit code {code}")
        exit_at = next((e.t for e, end in ProcessExit.all(facts.events)
                        if end.role == self.process), None)
        return self._outcome(code == self.exit_code, seen, exit_at)


@register
class Count(Expectation):
    """The number of matching events compares as stated."""

    count: EventMatch
    """The events to count: `{event: NAME, where: {...}}`."""
    equals: int | None = Field(default=None, ge=0)
    """The count must be exactly this."""
    at_least: int | None = Field(default=None, ge=0)
    """The count must be this or more."""
    at_most: int | None = Field(default=None, ge=0)
    """The count must be this or fewer. Give at least one of `equals`, `at_least`, `at_most`."""

    @model_validator(mode="after")
    def _some_bound(self) -> Count:
        if self.equals is None and self.at_least is None and self.at_most is None:
            raise ValueError("give 'equals', 'at_least' or 'at_most'")
        return self

    def describe(self) -> str:
        bounds = [f"== {self.equals}" if self.equals is not None else "",
                  f">= {self.at_least}" if self.at_least is not None else "",
                  f"<= {self.at_most}" if self.at_most is not None else ""]
        return f"count of {self.count.describe()} {' and '.join(b for b in bounds if b)}"

    def check(self, facts: RunFacts) -> Outcome:
        hits = [e.t for e in facts.events
                if e.matches(self.count.event, self.count.where, facts.protocol.kind_matches)]
        n = len(hits)
        held = ((self.equals is None or n == self.equals)
                and (self.at_least is None or n >= self.at_least)
                and (self.at_most is None or n <= self.at_most))
        return self._outcome(held, f"{n}", hits[-1] if hits else None)


@register
class Occurs(Expectation):
    """A matching event happens, within a deadline counted from the client's start or from another event."""

    event: str = Field(min_length=1)
    """The name of the event that must occur, e.g. `client.lost`."""
    where: dict[str, Any] = Field(default_factory=dict)
    """Fields the event must have with these values (a message's `kind` matches as in a frame
    trigger); empty: any event of that name."""
    after: EventMatch | None = None
    """Count from the first event matching this (`{event: NAME, where: {...}}`; a `fault.applied`
    from when its application began), and only events from then on; absent: the client's start."""
    not_before: Duration | None = None
    """The first matching event must come at least this long after the reference, e.g. `2s`."""
    within: Duration | None = None
    """The first matching event must come at most this long after the reference, e.g. `3.5s`;
    absent: any time before the run ends."""

    def describe(self) -> str:
        what = EventMatch(event=self.event, where=self.where).describe()
        since = f"{self.after.describe()}" if self.after else "the client's start"
        window = ""
        if self.not_before is not None and self.within is not None:
            window = f" {self.not_before:g}-{self.within:g}s after {since}"
        elif self.within is not None:
            window = f" within {self.within:g}s of {since}"
        elif self.not_before is not None:
            window = f" at least {self.not_before:g}s after {since}"
        elif self.after is not None:
            window = f" after {since}"
        return f"{what} occurs{window}"

    def check(self, facts: RunFacts) -> Outcome:
        t0 = facts.start
        if self.after is not None:
            ref = self.after.first(facts.events, facts.protocol.kind_matches)
            if ref is None:
                return self._outcome(False, f"{self.after.describe()} never happened")
            t0 = ref.began
        hits = [e.t - t0 for e in facts.events
                if e.matches(self.event, self.where, facts.protocol.kind_matches) and e.t >= t0]
        if not hits:
            return self._outcome(False, "never happened", t0 if self.after is not None else None)
        first = min(hits)
        held = ((self.not_before is None or first >= self.not_before)
                and (self.within is None or first <= self.within))
        return self._outcome(held, f"at +{first:.3f}s", t0 + first)


@register
class Alive(Expectation):
    """The process is still running when the run ends."""

    alive: ProcessRole
    """The process that must still be running when the run ends: `client` or `target`."""

    def describe(self) -> str:
        return f"{self.alive} alive at the end"

    def check(self, facts: RunFacts) -> Outcome:
        alive = self.alive in facts.alive_at_end
        return self._outcome(alive, "alive" if alive else "not running")
