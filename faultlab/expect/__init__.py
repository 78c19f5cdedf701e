"""Expectations: predicates over a finished run's events and processes.

Each kind is a model keyed by its first field, registered like faults: `exit_code`, `count`,
`event`, `alive` on any run; `resumes_refused`, `recovered_within`, `delivered_audio_ratio`,
`no_reply` on a Live API session; `candidate`, `audio_concealed` on a WebRTC call; and whatever
the installed scenario packs add (faultlab.scenarios, loaded by `expectation_kinds`). A profile's
`expect` list is validated against the kind each item names.
"""

from __future__ import annotations

from collections.abc import Sequence

from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.basic import Alive, Count, ExitCode, Occurs
from faultlab.expect.registry import EXPECTATIONS, register
from faultlab.expect.session import DeliveredAudioRatio, NoReply, Recovered, ResumesRefused
from faultlab.expect.webrtc import AudioConcealed, Candidate
from faultlab.scenarios import packs

__all__ = ["EXPECTATIONS", "Alive", "AudioConcealed", "Candidate", "Count", "DeliveredAudioRatio",
           "ExitCode", "Expectation", "NoReply", "Occurs", "Outcome", "Recovered",
           "ResumesRefused", "RunFacts", "evaluate", "expectation_kinds", "register"]


def expectation_kinds() -> dict[str, type[Expectation]]:
    """Every kind by the key a profile item starts with: the core's and the installed packs'.
    The packs register theirs as they load, here and not at import: a pack imports this package's
    modules, and loading it while this package is still being imported would close a circle."""
    packs()
    return EXPECTATIONS


def evaluate(expectations: Sequence[Expectation], facts: RunFacts) -> list[Outcome]:
    return [e.check(facts) for e in expectations]
