"""The base of expectations: the facts a finished run offers, and one verdict's shape."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from faultlab.events import Event
from faultlab.model import Model
from faultlab.protocols import DEFAULT
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.vocabulary.run import ProcessStart


@dataclass(frozen=True)
class RunFacts:
    """What expectations read: every event, exit codes, and who was alive when the run ended."""

    events: Sequence[Event]
    exit_codes: Mapping[str, int | None] = field(default_factory=dict)
    alive_at_end: frozenset[str] = frozenset()
    # The run's realtime API: what its messages' kinds mean (a reply, say).
    protocol: RealtimeApi = DEFAULT

    @property
    def start(self) -> float:
        """When the client started (run clock; 0 when it never did): "the start" of windows,
        as of time triggers, so that neither moves with how long the lab took to build."""
        return next((e.t for e, start in ProcessStart.all(self.events) if start.role == "client"),
                    0.0)


@dataclass(frozen=True)
class Outcome:
    """One expectation's verdict, with what was actually seen."""

    expectation: str
    held: bool
    seen: str
    # The moment (run clock) the verdict rests on, which a report links to; None: no one moment.
    at: float | None = None


class Expectation(Model, ABC):
    @abstractmethod
    def describe(self) -> str: ...

    @abstractmethod
    def check(self, facts: RunFacts) -> Outcome: ...

    def _outcome(self, held: bool, seen: str, at: float | None = None) -> Outcome:
        return Outcome(self.describe(), held, seen, at)


