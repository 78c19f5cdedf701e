"""What a WebRTC client says of its call (the aiortc reference client, faultlab/clients/webrtc.py;
a browser's page the same way): its ICE and connection states, the candidate pair ICE chose, and
every second the audio it receives. The expectations `candidate` and `audio_concealed`
(faultlab/expect/webrtc.py) read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Self

from faultlab.vocabulary.base import Drawing, Gauge, Record

_NOTE = Drawing("client", "note")


@dataclass(frozen=True)
class ClientIce(Record):
    """The call's ICE connection state (`new`, `checking`, `connected`, `completed`,
    `disconnected`, `failed`, `closed`), as RTCPeerConnection's iceConnectionState says it, or
    `gave up` (not connected in the client's time: it tries its next TURN server); `turn`: how
    the call reaches its TURN server (udp, tcp, tls), if it has one."""

    NAME: ClassVar[str] = "client.ice"
    DRAWN: ClassVar[Drawing] = _NOTE
    state: str
    turn: str | None = None

    def label(self) -> str | None:
        return f"ICE {self.state}" + (f" (TURN {self.turn})" if self.turn else "")


@dataclass(frozen=True)
class ClientCandidatePair(Record):
    """The candidate pair ICE chose: each end's type (`host`, `srflx`, `prflx`, `relay`), the
    transport between them (`protocol`), and for a relayed local end how it reaches the TURN
    server (`turn`: udp, tcp or tls; a browser's relayProtocol)."""

    NAME: ClassVar[str] = "client.candidate_pair"
    DRAWN: ClassVar[Drawing] = _NOTE
    local: str
    remote: str
    protocol: str
    local_address: str
    remote_address: str
    turn: str | None = None

    def label(self) -> str | None:
        how = f"relay/{self.turn}" if self.turn else f"{self.local}/{self.protocol}"
        return f"pair {how}"


@dataclass(frozen=True)
class ClientAudioStats(Record):
    """The audio received since the call began, every second: `received_s` of it played,
    `concealed_s` missing (lost, or late past the jitter buffer, which a player conceals), so
    `concealed` = concealed_s / (received_s + concealed_s); RTP's `packets_received`,
    `packets_lost` and `jitter_ms` (RFC 3550's interarrival jitter)."""

    NAME: ClassVar[str] = "client.audio_stats"
    PLOTTED: ClassVar[tuple[Gauge, ...]] = (
        Gauge("concealed", "%"), Gauge("packets lost", "/s"), Gauge("jitter", "ms"))
    received_s: float
    concealed_s: float
    concealed: float
    packets_received: int
    packets_lost: int
    jitter_ms: float

    def readings(self, before: Self | None) -> dict[str, float]:
        """Since `before` (or the call's start: a new call counts from 0 again): the share of
        the audio concealed (none if no audio came: a gap, not 0 %) and the packets lost (the
        readings come every second); and RTP's jitter now."""
        if before is not None and (
                self.received_s + self.concealed_s < before.received_s + before.concealed_s
                or self.packets_received < before.packets_received):
            before = None  # another call
        received = self.received_s - (before.received_s if before else 0.0)
        concealed = self.concealed_s - (before.concealed_s if before else 0.0)
        lost = self.packets_lost - (before.packets_lost if before else 0)
        span_s = received + concealed
        return {"concealed": 100 * concealed / span_s if span_s > 0 else math.nan,
                "packets lost": float(max(lost, 0)),
                "jitter": self.jitter_ms}
