"""WebRTC's pure parts: the peer connection asks no server faultlab did not name, audio frames
become pcm with lost ones concealed, the speaker track plays what it holds and tells when it ran
dry, the client's choice of TURN URLs, and the expectations on a call (hand-written events)."""

from __future__ import annotations

import argparse
import asyncio
import fractions
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from av import AudioFrame
from pydantic import ValidationError

import faultlab
from faultlab.clients.webrtc import (
    VOICE_GAP_S,
    Call,
    CallLink,
    _transport_of,
    turn_order,
    turn_url,
)
from faultlab.events import Event, EventWriter
from faultlab.expect import AudioConcealed, Candidate, RunFacts
from faultlab.webrtc import (
    FRAME_BYTES,
    RATE,
    PcmReader,
    SpeakerTrack,
    conceal,
    peer_connection,
    turn_servers,
)

URLS = ["turn:10.0.0.1:3478?transport=udp", "turn:10.0.0.1:3478?transport=tcp",
        "turns:10.0.0.1:5349?transport=tcp"]


def test_a_peer_connection_asks_only_the_servers_it_is_given() -> None:
    """aiortc's default when none are given is Google's STUN server: faultlab always gives the
    list, empty or the lab's TURN server."""
    async def configured() -> tuple[list[Any], list[Any]]:
        bare = peer_connection()
        turned = peer_connection(turn_servers(URLS[1:2], "u", "p"))
        try:  # aiortc keeps the configuration private (no getConfiguration)
            return (bare._RTCPeerConnection__configuration.iceServers,  # type: ignore[attr-defined]
                    turned._RTCPeerConnection__configuration.iceServers)  # type: ignore[attr-defined]
        finally:
            await bare.close()
            await turned.close()

    bare, turned = asyncio.run(configured())
    assert bare == []
    assert [(s.urls, s.username, s.credential) for s in turned] == [(URLS[1], "u", "p")]


def test_a_call_whose_voice_stopped_carries_nothing_whatever_ice_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ICE says completed while nothing of the service comes after a NAT rebinding aioice never
    nominates again: the call carries while the model's track sent a frame within VOICE_GAP_S
    (or none yet), and a ping waits until it does again."""
    from aiortc import RTCPeerConnection

    monkeypatch.setattr(RTCPeerConnection, "iceConnectionState", property(lambda _: "completed"))

    async def run() -> None:
        call = Call(peer_connection(), EventWriter(None), None)
        try:
            assert call.carrying  # no frame yet: ICE decides
            call.last_voice = time.monotonic()
            assert call.carrying
            call.last_voice = time.monotonic() - VOICE_GAP_S - 0.1
            assert not call.carrying
            waiter = await CallLink(call).ping()
            assert not waiter.done()
            call.voice_came()
            assert waiter.done() and not waiter.cancelled()
            call.last_voice = time.monotonic() - VOICE_GAP_S - 0.1
            call.voice_gap_s = 0.0  # --voice-gap 0: ICE alone
            assert call.carrying
        finally:
            await call.pc.close()

    asyncio.run(run())


def test_only_faultlab_webrtc_makes_peer_connections() -> None:
    """Every RTCPeerConnection faultlab makes goes through `peer_connection`, which names its
    ICE servers: a direct one elsewhere would ask Google's STUN server."""
    package = Path(faultlab.__file__).parent
    makers = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                    if "RTCPeerConnection(" in path.read_text(encoding="utf-8"))
    assert makers == ["webrtc.py"]


def frame(pts: int, level: int, rate: int = 48000, samples: int = 960) -> AudioFrame:
    """A 20 ms stereo s16 frame at `rate` (aiortc's Opus decoder's), every sample `level`."""
    out = AudioFrame.from_ndarray(np.full((1, samples * 2), level, dtype="<i2"), format="s16",
                                  layout="stereo")
    out.sample_rate, out.pts, out.time_base = rate, pts, fractions.Fraction(1, rate)
    return out


def test_missing_frames_are_concealed_in_their_place() -> None:
    """Frames as they come are pcm16 mono at 24 kHz, 20 ms each; a gap in their timestamps (two
    frames lost) is filled with as much audio, ramped from the frame before to the one after,
    and counted as concealed."""
    reader = PcmReader()
    first = reader.pcm(frame(0, 1000))
    after_gap = reader.pcm(frame(3 * 960, 4000))
    samples = np.frombuffer(after_gap, dtype="<i2")
    # (The resampler keeps a few samples back: a frame's pcm is about, not exactly, 20 ms.)
    assert abs(len(first) - FRAME_BYTES) <= 64
    assert abs(len(samples) - 3 * FRAME_BYTES // 2) <= 32
    gap = samples[:2 * FRAME_BYTES // 2]
    assert 900 <= abs(int(gap[0])) <= 1100 and abs(int(gap[-1])) > 3000  # the ramp
    assert reader.concealed_s == pytest.approx(0.040)
    assert reader.received_s == pytest.approx(0.040)


def test_concealment_without_audio_before_is_silence() -> None:
    assert conceal(b"", b"\x01\x00", 8) == bytes(8)
    assert conceal(b"\x10\x00", b"", 0) == b""


def test_the_speaker_track_plays_what_it_holds_then_silence_and_says_when_it_ran_dry() -> None:
    drained: list[float] = []
    track = SpeakerTrack(drained=lambda: drained.append(track.queued_s))
    track.play(np.full(FRAME_BYTES // 2 + 10, 7, dtype="<i2").tobytes())

    async def three() -> list[np.ndarray]:
        return [(await track.recv()).to_ndarray()[0] for _ in range(3)]

    played = asyncio.run(three())
    assert [int(f[0]) for f in played] == [7, 7, 0] and int(played[1][9]) == 7
    assert int(played[1][10]) == 0 and all(len(f) == RATE // 50 for f in played)
    assert drained == [0.0]
    track.play(bytes(FRAME_BYTES))
    assert track.clear() == pytest.approx(0.020)


@pytest.mark.parametrize(("transport", "url"), [
    ("udp", URLS[0]), ("tcp", URLS[1]), ("tls", URLS[2])])
def test_each_transport_has_its_turn_url(transport: str, url: str) -> None:
    assert turn_url(URLS, transport) == [url]
    assert _transport_of([url]) == transport


def test_turn_order_takes_known_transports_only() -> None:
    assert turn_order("tcp, tls") == ["tcp", "tls"]
    assert turn_url(URLS[1:], "udp") == [] and _transport_of([]) is None
    for bad in ("quic", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            turn_order(bad)


def ev(t: float, name: str, **fields: Any) -> Event:
    return Event(t, "client", name, fields)


PAIR = {"remote": "host", "local_address": "a:1", "remote_address": "b:2"}


def test_candidate_judges_the_last_pair_ice_chose() -> None:
    """A relay is spelled by how it reaches its TURN server; the last pair decides."""
    events = [ev(1.0, "client.candidate_pair", local="relay", protocol="udp", turn="udp", **PAIR),
              ev(9.0, "client.candidate_pair", local="relay", protocol="udp", turn="tcp", **PAIR)]
    assert Candidate(candidate="relay/tcp").check(RunFacts(events)).held
    outcome = Candidate(candidate="host/udp").check(RunFacts(events))
    assert not outcome.held and outcome.seen == "relay/tcp" and outcome.at == 9.0
    assert Candidate(candidate="host/udp").check(RunFacts([])).seen == "no candidate pair"
    either = Candidate(candidate=["relay/tls", "relay/tcp"])
    assert either.check(RunFacts(events)).held
    assert either.describe() == "candidate pair relay/tls or relay/tcp"
    assert not Candidate(candidate=["relay/tls", "host/udp"]).check(RunFacts(events)).held
    for wrong in ("relay/quic", ["relay/tcp", "relay/quic"], []):
        with pytest.raises(ValidationError):
            Candidate(candidate=wrong)


def test_audio_concealed_judges_the_whole_call() -> None:
    stats = dict(packets_received=100, packets_lost=2, jitter_ms=3.0)
    events = [ev(1.0, "client.audio_stats", received_s=1.0, concealed_s=0.5, concealed=0.3333,
                 **stats),
              ev(2.0, "client.audio_stats", received_s=9.5, concealed_s=0.5, concealed=0.05,
                 **stats)]
    held = AudioConcealed.model_validate({"audio_concealed": {"at_most": 0.05}})
    assert held.check(RunFacts(events)).held
    assert held.check(RunFacts(events)).seen == "5.0% (0.50s of 10.00s)"
    assert held.describe() == "audio concealed <= 0.05"
    assert not held.check(RunFacts(events[:1])).held
    assert not held.check(RunFacts([])).held
