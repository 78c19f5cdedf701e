"""Expectations on a WebRTC call, from what its client says (faultlab.vocabulary.webrtc): the
candidate pair ICE chose (`candidate`), and how much of the model's voice had to be concealed
(`audio_concealed`)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.registry import register
from faultlab.expect.session import Bounds
from faultlab.vocabulary.webrtc import ClientAudioStats, ClientCandidatePair

CANDIDATE = re.compile(r"^(host|srflx|prflx|relay)/(udp|tcp|tls)$")


def spelled(pair: ClientCandidatePair) -> str:
    """A pair as `candidate` spells it: the local end's type, then how its packets travel (a
    relay's: to its TURN server; a direct pair's: its own transport)."""
    return f"{pair.local}/{pair.turn or pair.protocol}"


@register
class Candidate(Expectation):
    """The candidate pair ICE chose last (the client's `client.candidate_pair`) is this one (or
    one of these): the local end's type and how its packets travel, e.g. `relay/tcp` (through
    the TURN server, reached over TCP), `host/udp` (straight)."""

    candidate: str | list[str] = Field(examples=["relay/tcp", "host/udp",
                                                 ["relay/tcp", "relay/tls"]])
    """`<type>/<transport>`, or a list of them (any one holds): type `host`, `srflx`, `prflx` or
    `relay`; transport `udp`, `tcp` or `tls` (for a relay: how it reaches its TURN server)."""

    @field_validator("candidate")
    @classmethod
    def _spelled(cls, value: str | list[str]) -> str | list[str]:
        for one in [value] if isinstance(value, str) else value:
            if not CANDIDATE.match(one):
                raise ValueError(f"{one!r}: write <host|srflx|prflx|relay>/<udp|tcp|tls>")
        if not value:
            raise ValueError("name at least one pair")
        return value

    @property
    def accepted(self) -> list[str]:
        return [self.candidate] if isinstance(self.candidate, str) else self.candidate

    def describe(self) -> str:
        return f"candidate pair {' or '.join(self.accepted)}"

    def check(self, facts: RunFacts) -> Outcome:
        pairs = [(e.t, pair) for e, pair in ClientCandidatePair.all(facts.events)]
        if not pairs:
            return self._outcome(False, "no candidate pair")
        t, last = pairs[-1]
        return self._outcome(spelled(last) in self.accepted, spelled(last), t)


@register
class AudioConcealed(Expectation):
    """The share of the model's voice the client had to conceal (lost, or too late for its
    jitter buffer) over the whole call, from its last `client.audio_stats`: e.g.
    `{at_most: 0.05}`."""

    audio_concealed: Bounds
    """Bounds on concealed / (received + concealed), a fraction (0.05 is 5 %)."""

    def describe(self) -> str:
        return f"audio concealed {self.audio_concealed.describe()}"

    def check(self, facts: RunFacts) -> Outcome:
        stats = [(e.t, s) for e, s in ClientAudioStats.all(facts.events)]
        if not stats:
            return self._outcome(False, "no audio stats")
        t, last = stats[-1]
        seen = (f"{last.concealed:.1%} ({last.concealed_s:.2f}s of "
                f"{last.received_s + last.concealed_s:.2f}s)")
        return self._outcome(self.audio_concealed.hold(last.concealed), seen, t)
