"""Expectations: predicates over a finished run's events and processes.

Each kind is a model keyed by its first field (`exit_code`, `count`, `event`, `alive`, and for
streaming sessions `truthful`, `bookings`, `resumes_refused`, `recovered_within`,
`delivered_audio_ratio`, `no_reply`); a profile's `expect` list is validated against the kind each
item names.
"""

from __future__ import annotations

from collections.abc import Sequence

from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.basic import Alive, Count, ExitCode, Occurs
from faultlab.expect.session import (
    Bookings,
    DeliveredAudioRatio,
    NoReply,
    Recovered,
    ResumesRefused,
    Truthful,
)

__all__ = ["EXPECTATIONS", "Alive", "Bookings", "Count", "DeliveredAudioRatio", "ExitCode",
           "Expectation", "NoReply", "Occurs", "Outcome", "Recovered", "ResumesRefused", "RunFacts",
           "Truthful", "evaluate"]

EXPECTATIONS: dict[str, type[Expectation]] = {
    "exit_code": ExitCode, "count": Count, "event": Occurs, "alive": Alive,
    "truthful": Truthful, "bookings": Bookings, "resumes_refused": ResumesRefused,
    "recovered_within": Recovered, "delivered_audio_ratio": DeliveredAudioRatio,
    "no_reply": NoReply,
}


def evaluate(expectations: Sequence[Expectation], facts: RunFacts) -> list[Outcome]:
    return [e.check(facts) for e in expectations]
