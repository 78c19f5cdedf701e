"""openai-webrtc and openai-webrtc-recovery: the booking conversation over OpenAI Realtime's
WebRTC, as a browser or a phone app holds it: aiortc's peer connection, its SDP offer POSTed
with the official `openai` SDK (`client.realtime.calls.create`, the session's settings beside
it), the events on the `oai-events` data channel, the microphone and the model's voice on Opus
tracks. The conversation loop is every reference client's (faultlab/clients/driver.py); this is
its transport.

ICE: host candidates, and the lab's TURN server when the profile has one (`FAULTLAB_TURN_URLS`,
credentials from the environment). aiortc takes a single TURN server a call, so the client tries
the URLs in turn (`--turn`: udp, tcp, tls by default), each until `--ice-timeout`. No STUN
server is ever asked (aiortc's default is Google's).

A call is alive while ICE holds its pair and the model's voice comes: the loop's pings are
answered while the ICE connection is connected (aioice checks consent every 5 s) and the
service's track has sent a frame within `--voice-gap` (2 s: the emulator sends one every 20 ms,
silence too; 0 turns it off, for a service that stops its track in silence), so a path that
dies is noticed when ICE says so or its voice stops, and `--lost-after` later. The voice tells
what ICE does not: after the user's NAT rebinds the call, aioice's consent checks reach the
service from the new port and are answered there, while the service, which aioice never asks to
move (its checks do not nominate), sends to the old one.

The service resumes nothing: openai-webrtc gives a lost call up, as openai-naive does;
openai-webrtc-recovery calls again (every `--retry-after`, until `--window`) and restores the
conversation into the new session, as openai-recovery does.

Events: the reference clients' (client.connected, client.ask, client.tool_call, client.answer,
client.lost, ...) and the call's: client.ice (state), client.candidate_pair (the pair ICE chose),
client.audio_stats every second (what arrived of the model's voice: concealed share, RTP
packets lost, jitter). Exit codes as openai-naive's and openai-recovery's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from faultlab.clients import uplink
from faultlab.clients.driver import Connection, Heard, ReferenceClient, Refused
from faultlab.clients.options import main
from faultlab.clients.realtime import RealtimeTransport, Reconnect, heard, parser
from faultlab.events import EventWriter
from faultlab.protocols.openai import AUDIO_RATE
from faultlab.scenarios.booking.conversation import Turn
from faultlab.speech import resample
from faultlab.turn_urls import LISTENERS, handed, listener_of
from faultlab.units import parse_duration
from faultlab.vocabulary.webrtc import ClientAudioStats, ClientCandidatePair, ClientIce

if TYPE_CHECKING:
    from aiortc import RTCDataChannel, RTCPeerConnection

    from faultlab.webrtc import SpeakerTrack

STATS_EVERY_S = 1.0
# How long the service's track may send nothing before the call counts as dead (--voice-gap):
# 100 of its 20 ms frames (silence is sent as frames too); a lossy path's bursts are far shorter.
VOICE_GAP_S = 2.0
# ICE connection states in which the call carries media (RFC 8445; RTCIceConnectionState).
CARRYING = ("connected", "completed")


def turn_url(urls: list[str], transport: str) -> list[str]:
    """The lab's TURN URL of `transport` (udp, tcp, tls), as a list of one (none: [])."""
    return [u for u in urls if listener_of(u) == transport][:1]


def turn_order(text: str) -> list[str]:
    """`--turn`'s value: transports, comma-separated."""
    order = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in order if t not in LISTENERS]
    if unknown or not order:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a comma-separated list of {', '.join(LISTENERS)}")
    return order


class CallLink:
    """A call as the loop's liveness watches a WebSocket (faultlab.clients.sdk): a ping is
    answered while the call carries (Call.carrying); aborting it closes the peer connection."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.transport = self

    @property
    def state(self) -> SimpleNamespace:
        return SimpleNamespace(name="OPEN" if self.call.carrying else "CLOSED")

    async def ping(self) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.call.carrying:
            waiter.set_result(None)
        else:
            self.call.pongs.append(waiter)
        return waiter

    def abort(self) -> None:
        self.call.finish()

    def get_extra_info(self, name: str) -> None:
        return None


class Call:
    """One call: its peer connection, the events it received, the audio both ways."""

    def __init__(self, pc: RTCPeerConnection, events: EventWriter, turn: str | None,
                 voice_gap_s: float = VOICE_GAP_S) -> None:
        from faultlab.webrtc import CHANNEL, PcmReader, SpeakerTrack

        self.pc = pc
        self.events = events
        self.turn = turn  # how it reaches its TURN server, if it has one
        self.voice_gap_s = voice_gap_s  # 0: ICE alone tells whether it carries
        self.mic: SpeakerTrack = SpeakerTrack()
        self.channel: RTCDataChannel = pc.createDataChannel(CHANNEL)  # O18
        self.received: asyncio.Queue[Heard | None] = asyncio.Queue()
        self.opened = asyncio.Event()
        self.pongs: list[asyncio.Future[None]] = []
        self.playing = False  # between output_audio_buffer.started and .stopped
        self.held: Heard | None = None  # response.done, until the audio has played
        self.tasks: list[asyncio.Task[None]] = []
        self.call_id: str | None = None
        self.last_voice: float | None = None  # when a frame of the model's track last came
        self.finished = False
        self.closing: asyncio.Task[None] | None = None
        # What arrived of the model's voice (ClientAudioStats), as a player takes it.
        self.voice = PcmReader()
        self._connection = CallLink(self)  # what faultlab.clients.sdk looks for
        pc.addTrack(self.mic)
        pc.on("track", self._track)
        pc.on("iceconnectionstatechange", self._ice)
        self.channel.on("open", self.opened.set)
        self.channel.on("message", self._message)
        self.channel.on("close", self.finish)

    @property
    def carrying(self) -> bool:
        voice = (not self.voice_gap_s or self.last_voice is None
                 or time.monotonic() - self.last_voice < self.voice_gap_s)
        return self.pc.iceConnectionState in CARRYING and voice and not self.finished

    def voice_came(self) -> None:
        """A frame of the model's track came: the call carries again if ICE does."""
        self.last_voice = time.monotonic()
        if self.carrying:
            self._answer_pings()

    def _answer_pings(self) -> None:
        for waiter in self.pongs:
            if not waiter.done():
                waiter.set_result(None)
        self.pongs.clear()

    def send(self, event: dict[str, Any]) -> None:
        if self.channel.readyState == "open":
            self.channel.send(json.dumps(event))

    def _message(self, message: str | bytes) -> None:
        event = json.loads(message, object_hook=lambda d: SimpleNamespace(**d))
        kind = getattr(event, "type", "")
        said = heard(event)
        if kind == "output_audio_buffer.started":
            self.playing = True
        elif kind == "response.done" and self.playing:
            # The user hears the response end when its audio has played, as a voice UI has it
            # (openai-agents-js waits for output_audio_buffer.stopped the same way).
            self.held = said
            return
        self.received.put_nowait(said)
        if kind in ("output_audio_buffer.stopped", "output_audio_buffer.cleared"):
            self.playing = False
            if self.held is not None:
                self.received.put_nowait(self.held)
                self.held = None

    def _ice(self) -> None:
        from faultlab.webrtc import selected_pair

        state = self.pc.iceConnectionState
        self.events.announce(ClientIce(state, turn=self.turn))
        if state in CARRYING:
            self._answer_pings()
            pair = selected_pair(self.pc)
            if pair is not None:
                self.events.announce(ClientCandidatePair(**pair))
        elif state in ("failed", "closed"):
            self.finish()

    def _track(self, track: Any) -> None:
        if track.kind == "audio":
            self.tasks.append(asyncio.create_task(self._hear(track)))
            self.tasks.append(asyncio.create_task(self._report_stats()))

    async def _hear(self, track: Any) -> None:
        """The model's voice: what played, and what is missing by the RTP timestamps (the
        frames' pts), which a player conceals (faultlab.webrtc.PcmReader)."""
        from aiortc.mediastreams import MediaStreamError

        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            self.voice.pcm(frame)
            self.voice_came()
            if self.playing:
                self.received.put_nowait(Heard("output_audio", quiet=True, output=True,
                                               audio=True,
                                               audio_s=frame.samples / frame.sample_rate))

    async def _report_stats(self) -> None:
        while not self.finished:
            await asyncio.sleep(STATS_EVERY_S)
            lost = received = 0
            jitter_ms = 0.0
            for stats in (await self.pc.getStats()).values():
                if getattr(stats, "type", "") == "inbound-rtp":
                    lost, received = stats.packetsLost, stats.packetsReceived
                    jitter_ms = stats.jitter / 48  # Opus's RTP clock: 48 kHz
            got, missing = self.voice.received_s, self.voice.concealed_s
            self.events.announce(ClientAudioStats(
                round(got, 3), round(missing, 3),
                round(missing / (got + missing), 4) if got + missing else 0.0, received, lost,
                round(jitter_ms, 2)))

    def finish(self) -> None:
        """The call is over (its channel closed, ICE failed, or we ended it)."""
        if self.finished:
            return
        self.finished = True
        self.received.put_nowait(None)
        for task in self.tasks:
            task.cancel()
        # One close, whoever waits for it (aiortc's close, cancelled part-way, leaves the peer
        # connection half closed: waits shield it).
        self.closing = asyncio.get_running_loop().create_task(self.pc.close())


class WebRtcTransport(RealtimeTransport):
    """OpenAI Realtime over WebRTC: the openai SDK's transport but for the media and events."""

    def __init__(self, args: argparse.Namespace, events: EventWriter) -> None:
        super().__init__(args)
        self.events = events

    def _turn_choices(self) -> list[list[str]]:
        """The TURN URL of each attempt, in order (aiortc takes one a call): those of `--turn`,
        or every URL the lab gave; [[]] (host candidates only) without a TURN server."""
        urls = handed(os.environ).urls
        if not urls:
            return [[]]
        return [chosen for t in self.args.turn or list(LISTENERS)
                if (chosen := turn_url(urls, t))]

    async def connect(self, handle: str | None) -> Connection:
        """A new call, on the first TURN URL with which ICE connects within `--ice-timeout`
        (a browser tries its TURN servers at once; aiortc one a call, so one after another)."""
        choices = self._turn_choices()
        for i, urls in enumerate(choices):
            try:
                return await self._call(urls)
            except TimeoutError:
                self.events.announce(ClientIce("gave up", turn=_transport_of(urls)))
                if i == len(choices) - 1:
                    raise
        raise OSError("no TURN URL of --turn is in FAULTLAB_TURN_URLS")

    async def _call(self, urls: list[str]) -> Connection:
        """A call through `urls`: the offer (candidates gathered, TURN's allocated) POSTed with
        the session's settings, the answer set, the events' channel open, `session.created`."""
        import openai
        from aiortc import RTCSessionDescription

        from faultlab.webrtc import peer_connection, turn_servers

        turn = handed(os.environ)
        servers = turn_servers(urls, turn.username, turn.credential)
        call = Call(peer_connection(servers), self.events, _transport_of(urls),
                    self.args.voice_gap)
        try:
            async with asyncio.timeout(self.args.ice_timeout or self.args.connect_timeout):
                await call.pc.setLocalDescription(await call.pc.createOffer())
                session: Any = {**self._session_settings(), "model": self.args.model}
                try:
                    answer = await self.client.realtime.calls.create(
                        sdp=call.pc.localDescription.sdp, session=session)
                except openai.APIStatusError as exc:
                    raise Refused(exc.status_code, exc.message) from None
                except openai.APIConnectionError as exc:  # no HTTP answer at all (a timeout too)
                    raise OSError(f"the offer got no answer: {exc}") from None
                call.call_id = answer.response.headers.get("location", "").rsplit("/", 1)[-1]
                await call.pc.setRemoteDescription(RTCSessionDescription(answer.text, "answer"))
                await call.opened.wait()
                first = await call.received.get()
                if first is None:
                    raise OSError("the call ended before session.created")
                if first.error is not None:
                    raise Refused(*first.error)
        except BaseException:
            await self._end(call)
            raise
        return None, call

    async def messages(self, session: Any) -> AsyncIterator[Heard]:
        call: Call = session
        while (said := await call.received.get()) is not None:
            yield said

    def why_lost(self, error: Exception) -> str:
        return type(error).__name__

    async def _respond(self, session: Any) -> None:
        await self.idle.wait()
        self.idle.clear()
        session.send({"type": "response.create"})

    async def say(self, session: Any, turns: list[Turn], turn_complete: bool) -> None:
        for role, text in turns:
            session.send({"type": "conversation.item.create", "item": {
                "type": "message", "role": role,
                "content": [{"type": "input_text", "text": text}]}})
        if turn_complete:
            await self._respond(session)

    async def answer_call(self, session: Any, call_id: str, name: str,
                          response: dict[str, Any]) -> None:
        session.send({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": call_id,
            "output": json.dumps(response)}})
        await self._respond(session)

    async def send_audio(self, session: Any, pcm: bytes) -> None:
        samples = np.frombuffer(pcm, dtype="<i2")
        session.mic.play(resample(samples, uplink.RATE, AUDIO_RATE).astype("<i2").tobytes())

    async def close(self, connection: Connection) -> None:
        await self._end(connection[1])

    async def _end(self, call: Call) -> None:
        """Hang the call up (the service's hangup route) and close its peer connection."""
        if call.call_id:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.client.realtime.calls.hangup(call.call_id), 1.0)
            call.call_id = None
        call.finish()
        if call.closing is not None:
            # A TURN allocation over UDP toward a dead path takes ~30 s to give up: the close
            # goes on after this wait.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(call.closing), 1.0)


def _transport_of(urls: list[str]) -> str | None:
    """How a call reaches its TURN server (udp, tcp, tls), None without one."""
    return listener_of(urls[0]) if urls else None


def webrtc(reconnect: bool) -> Any:
    def client(args: argparse.Namespace, events: EventWriter) -> ReferenceClient:
        return ReferenceClient(args, events, WebRtcTransport(args, events), Reconnect(reconnect))
    return client


def webrtc_parser(give_up_after_s: float) -> argparse.ArgumentParser:
    p = parser(__doc__, give_up_after_s)
    p.add_argument("--turn", type=turn_order, default=None,
                   help="the lab's TURN URLs to try, by transport, in order (udp,tcp,tls; "
                        "default: all the lab gave); aiortc takes one a call")
    p.add_argument("--ice-timeout", type=parse_duration, default=5.0,
                   help="a call whose ICE has not connected (and channel opened) by then is "
                        "given up, and the next TURN URL tried")
    p.add_argument("--voice-gap", type=parse_duration, default=VOICE_GAP_S,
                   help="a call whose model's track sent nothing for this long carries nothing, "
                        "whatever ICE says (0: ICE alone; for a service that stops its track in "
                        "silence)")
    return p


def naive_cli() -> None:
    main(webrtc(reconnect=False), webrtc_parser(0.0))


def recovery_cli() -> None:
    main(webrtc(reconnect=True), webrtc_parser(30.0))
