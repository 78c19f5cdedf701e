"""What faultlab's two WebRTC ends share (the emulator's calls, faultlab/emulator/webrtc.py, and the
reference client's, faultlab/clients/webrtc.py): a peer connection that asks no server faultlab
did not name, and audio as the realtime APIs carry it (pcm16, mono, 24 kHz) on an Opus track.

aiortc is imported here, and this module only where WebRTC is used: its import (av, pylibsrtp)
is no cost of a WebSocket run.
"""

from __future__ import annotations

import asyncio
import fractions
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
)
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame, AudioResampler

# The data channel OpenAI Realtime's events take (docs/openai-realtime.md, O18).
CHANNEL = "oai-events"
# How long a closing end waits for its channel's last messages to be acknowledged.
DRAIN_S = 1.0
# The realtime APIs' audio: pcm16, mono, 24 kHz (docs/openai-realtime.md).
RATE = 24000
# One RTP packet's audio: Opus's usual 20 ms, as browsers send it.
PTIME_S = 0.020
FRAME_SAMPLES = int(RATE * PTIME_S)
FRAME_BYTES = FRAME_SAMPLES * 2
# Audio a speaker track holds before it drops the oldest: a model speaks faster than real time
# only under a time scale, where what is late is of no use.
MAX_QUEUED_S = 120.0
# The longest gap in a track's timestamps filled with silence (a longer one is a new stream, not
# loss: a sender that paused).
MAX_GAP_S = 1.0


def peer_connection(ice_servers: Sequence[RTCIceServer] = ()) -> RTCPeerConnection:
    """A peer connection that gathers its host candidates and asks only `ice_servers`: aiortc's
    default, when none are given, is Google's public STUN server, which no run may reach."""
    return RTCPeerConnection(RTCConfiguration(iceServers=list(ice_servers)))


def turn_servers(urls: Sequence[str], username: str, credential: str) -> list[RTCIceServer]:
    """The lab's TURN server (faultlab.turn) as aiortc takes it: one entry per URL."""
    return [RTCIceServer(urls=url, username=username, credential=credential) for url in urls]


class PcmReader:
    """An audio track's frames as pcm16 mono at RATE (aiortc's Opus decoder gives 48 kHz
    stereo), concealing what is missing: aiortc's jitter buffer drops the frames a lost packet
    holds up (measured: 4-5 frames of 20 ms a lost packet) and conceals nothing, so the gap in
    the frames' timestamps is filled (`conceal`), as a player's loss concealment does (silence
    there cut a spoken request's loudness contour until the emulator no longer recognised it at
    1 % loss)."""

    def __init__(self) -> None:
        self._resampler = AudioResampler(format="s16", layout="mono", rate=RATE)
        self._next_pts: int | None = None
        self._last = b""
        self.received_s = 0.0  # audio that came
        self.concealed_s = 0.0  # audio missing, concealed

    def pcm(self, frame: AudioFrame) -> bytes:
        gap_s = 0.0
        if self._next_pts is not None and frame.pts is not None and frame.pts > self._next_pts:
            gap_s = min((frame.pts - self._next_pts) / frame.sample_rate, MAX_GAP_S)
        if frame.pts is not None:
            self._next_pts = frame.pts + frame.samples
        self.received_s += frame.samples / frame.sample_rate
        self.concealed_s += gap_s
        pcm = b"".join(bytes(out.planes[0])[:out.samples * 2]
                       for out in self._resampler.resample(frame))
        concealed = conceal(self._last, pcm, int(gap_s * RATE) * 2)
        if pcm:
            self._last = pcm
        return concealed + pcm


def conceal(before: bytes, after: bytes, size: int) -> bytes:
    """`size` bytes of pcm16 in place of lost audio between `before` and `after` (the frames
    around the gap): `before` repeated, its level ramped to `after`'s, as a player's loss
    concealment extends the signal and merges into what follows; silence with nothing before."""
    if not before or not size:
        return bytes(size)
    count = size // 2
    last = np.frombuffer(before, dtype="<i2").astype(np.float64)
    wave = np.resize(last, count)
    start, end = _level(last), _level(np.frombuffer(after, dtype="<i2").astype(np.float64))
    gain = np.geomspace(1.0, max(end, 1.0) / max(start, 1.0), count) if start > 0 else 0.0
    return np.clip(wave * gain, -32768, 32767).astype("<i2").tobytes()


def _level(samples: np.ndarray) -> float:
    """RMS of pcm16 samples (0 for none)."""
    return float(np.sqrt(np.mean(samples ** 2))) if len(samples) else 0.0


class SpeakerTrack(MediaStreamTrack):
    """An outgoing audio track fed with pcm16 at RATE (`play`): it sends what it holds in real
    time, 20 ms a frame, and silence when it holds nothing, as a microphone does."""

    kind = "audio"

    def __init__(self, drained: Callable[[], None] | None = None) -> None:
        super().__init__()
        # Called when the last of what it held has been sent.
        self.drained = drained
        self._queued = bytearray()
        self._start: float | None = None
        self._sent = 0  # samples

    @property
    def queued_s(self) -> float:
        """Audio not yet sent."""
        return len(self._queued) / 2 / RATE

    def play(self, pcm: bytes) -> None:
        self._queued += pcm
        excess = len(self._queued) - int(MAX_QUEUED_S * RATE) * 2
        if excess > 0:
            del self._queued[:excess]

    def clear(self) -> float:
        """Drop what is not yet sent; how much that was, in seconds."""
        dropped = self.queued_s
        self._queued.clear()
        return dropped

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            await asyncio.sleep(max(0.0, self._start + self._sent / RATE - time.monotonic()))
        chunk = bytes(self._queued[:FRAME_BYTES])
        del self._queued[:FRAME_BYTES]
        if chunk and not self._queued and self.drained is not None:
            self.drained()
        frame = AudioFrame.from_ndarray(
            np.frombuffer(chunk.ljust(FRAME_BYTES, b"\0"), dtype="<i2").reshape(1, -1),
            format="s16", layout="mono")
        frame.sample_rate = RATE
        frame.pts = self._sent
        frame.time_base = fractions.Fraction(1, RATE)
        self._sent += FRAME_SAMPLES
        return frame


def nominated_pair(pc: RTCPeerConnection) -> Any:
    """aioice's candidate pair that ICE nominated (None: none yet); another one once the peer
    nominates another (a peer-reflexive one after its NAT rebound it, say). aiortc does not
    expose it: it is aioice's connection's `_nominated`."""
    ice = _ice_transport(pc)
    nominated = getattr(getattr(ice, "_connection", None), "_nominated", {}) if ice else {}
    return nominated.get(1)


def selected_pair(pc: RTCPeerConnection) -> dict[str, str] | None:
    """The candidate pair ICE nominated (None: none yet): each end's type (host, srflx, prflx,
    relay) and address, the transport between them, and for a relayed local end how it reaches
    its TURN server (`turn`: udp, tcp or tls), as a browser's `relayProtocol` says; for a relay
    it is read from its TURN transport's inner protocol (aioice.turn)."""
    from aioice.turn import TurnClientTcpProtocol

    pair = nominated_pair(pc)
    if pair is None:
        return None
    local, remote = pair.local_candidate, pair.remote_candidate
    out = {"local": local.type, "remote": remote.type, "protocol": local.transport.lower(),
           "local_address": f"{local.host}:{local.port}",
           "remote_address": f"{remote.host}:{remote.port}"}
    if local.type == "relay":
        inner = getattr(pair.protocol.transport, "_TurnTransport__inner_protocol", None)
        if isinstance(inner, TurnClientTcpProtocol):
            tls = inner.transport.get_extra_info("ssl_object") is not None
            out["turn"] = "tls" if tls else "tcp"
        else:
            out["turn"] = "udp"
    return out


async def drained(pc: RTCPeerConnection, channel: object | None) -> None:
    """Until what `channel` was given to send has been acknowledged by the peer (at most
    DRAIN_S): closing the peer connection aborts SCTP (an ABORT chunk), and what was not yet
    acknowledged, an error told just before a close, say, is lost with it. aiortc exposes no
    such wait: it is read from its SCTP transport's queues."""
    sctp = pc.sctp
    deadline = time.monotonic() + DRAIN_S
    while sctp is not None and time.monotonic() < deadline:
        buffered = getattr(channel, "bufferedAmount", 0)
        if not (buffered or getattr(sctp, "_outbound_queue", None)
                or getattr(sctp, "_sent_queue", None)
                or getattr(sctp, "_data_channel_queue", None)):
            return
        await asyncio.sleep(0.01)


def _ice_transport(pc: RTCPeerConnection) -> object | None:
    """The peer connection's ICE transport (one, bundled: the data channel's or the first
    transceiver's)."""
    if pc.sctp is not None:
        return pc.sctp.transport.transport
    for transceiver in pc.getTransceivers():
        return transceiver.receiver.transport.transport
    return None
