"""Expectations: predicates over a finished run's events and processes.

Each kind is a model keyed by its first field, registered like faults: `exit_code`, `count`,
`event`, `alive` on any run; `resumes_refused`, `recovered_within`, `delivered_audio_ratio`,
`no_reply` on a Live API session; and whatever the scenario packs in faultlab/scenarios/ add. A
profile's `expect` list is validated against the kind each item names.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.basic import Alive, Count, ExitCode, Occurs
from faultlab.expect.registry import EXPECTATIONS, register
from faultlab.expect.session import DeliveredAudioRatio, NoReply, Recovered, ResumesRefused

# The packs register their kinds as they are imported; by name, not statically: a pack imports the
# registry, and an import back would close a circle.
importlib.import_module("faultlab.scenarios")

__all__ = ["EXPECTATIONS", "Alive", "Count", "DeliveredAudioRatio", "ExitCode", "Expectation",
           "NoReply", "Occurs", "Outcome", "Recovered", "ResumesRefused", "RunFacts", "evaluate",
           "register"]


def evaluate(expectations: Sequence[Expectation], facts: RunFacts) -> list[Outcome]:
    return [e.check(facts) for e in expectations]
