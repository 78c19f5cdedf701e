"""What a run produced: its folder, the expectations' outcomes, and any failure of the lab."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from faultlab.events import Event
from faultlab.expect import Outcome
from faultlab.lab.process import Ending
from faultlab.profile import Profile

EXIT_OK, EXIT_EXPECTATION, EXIT_LAB = 0, 1, 3


@dataclass
class RunResult:
    """One run's outcome; `exit_code` and `verdict` follow from the error and the outcomes."""

    profile: Profile
    run_dir: Path
    started: datetime
    duration_s: float = 0.0
    outcomes: list[Outcome] = field(default_factory=list)
    # At teardown (None: still running), as expectations judge them.
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    # How each process ended in the end: by itself, or stopped by the run (and whether killed).
    endings: dict[str, Ending] = field(default_factory=dict)
    error: str | None = None
    unfired: list[str] = field(default_factory=list)
    events: Sequence[Event] = ()
    # The end of what expectations judge: teardown's own consequences come after it.
    observed_until: float = float("inf")

    @property
    def observed(self) -> list[Event]:
        return [e for e in self.events if e.t <= self.observed_until]

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return EXIT_LAB
        return EXIT_OK if all(o.held for o in self.outcomes) else EXIT_EXPECTATION

    @property
    def verdict(self) -> str:
        return {EXIT_OK: "PASS", EXIT_EXPECTATION: "FAIL", EXIT_LAB: "ERROR"}[self.exit_code]
