"""OpenAI Realtime over WebRTC in the emulator, as the service offers it (docs/openai-realtime.md,
"WebRTC"): the client POSTs its SDP offer to `/v1/realtime/calls` (with its key, or a client
secret from `/v1/realtime/client_secrets`) and gets the answer (201, `Location` naming the call);
events go both ways on the `oai-events` data channel, audio on an Opus track each way. The
session behind a call is the WebSocket's (faultlab.emulator.session): same personality, VAD,
turns and tool calls. aiortc does everything below the events.

What a call changes, as the service does:
- The user's audio comes on the track: every 100 ms of it is an `input_audio_buffer.append` to
  the core (the server's VAD then hears it as a WebSocket's).
- The model's audio (`response.output_audio.delta`) is played on the track, not sent on the
  channel; `output_audio_buffer.started` says it began, `.stopped` that the track played it all,
  `.cleared` that it was cut (the user spoke, `input_audio_buffer.speech_started`, or the client
  sent `output_audio_buffer.clear`).
- The core closing the connection ends the call (the peer connection closes); the peer
  connection failing or closing is the client's disconnect.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from email.parser import BytesParser
from email.policy import HTTP
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from websockets.datastructures import Headers, MultipleValuesError
from websockets.http11 import Response

from faultlab.emulator.apis.openai_encode import ERROR_TYPE
from faultlab.emulator.outbox import Action
from faultlab.vocabulary.run import FrameLogged
from faultlab.vocabulary.server import EmulatorCall, EmulatorRefused

if TYPE_CHECKING:
    from aiortc import RTCDataChannel, RTCPeerConnection

    from faultlab.emulator.apis.base import EmulatedApi
    from faultlab.emulator.wsinternals import Posted
    from faultlab.events import Announcement
    from faultlab.webrtc import PcmReader, SpeakerTrack

log = logging.getLogger(__name__)

CALLS = re.compile(r"^/v1/realtime/calls/?$")
HANGUP = re.compile(r"^/v1/realtime/calls/(rtc_[0-9a-f]+)/hangup/?$")
SECRETS = re.compile(r"^/v1/realtime/client_secrets/?$")
# A client secret's life when the request names none (the service's default: 10 minutes), and
# the range a request may ask for (the service's: 10 s to 2 hours).
SECRET_TTL_S = 600
SECRET_TTL_RANGE_S = (10, 7200)
# The model's audio, which a call plays on its track (O18).
PLAYED = ("response.output_audio.delta",)
# The user's audio handed to the core at once (5 RTP frames).
APPEND_S = 0.1
# How long the channel may take to open after the answer before the call is given up.
CHANNEL_OPEN_S = 30.0


def is_signalling(path: str) -> bool:
    """Whether a POST's path is one of the calls' routes."""
    clean = "/" + urlsplit(path).path.strip("/")
    return any(route.match(clean) for route in (CALLS, HANGUP, SECRETS))


def _answer(status: HTTPStatus, body: bytes, content_type: str,
            extra: Mapping[str, str] | None = None) -> Response:
    headers = Headers({"Content-Type": content_type, "Content-Length": str(len(body)),
                       "Connection": "close", **(extra or {})})
    return Response(status.value, status.phrase, headers, body)


def _error(status: HTTPStatus, message: str, code: str | None = None) -> Response:
    """An error as the service's REST API words it."""
    error = {"message": message, "type": ERROR_TYPE, "param": None, "code": code}
    return _answer(status, json.dumps({"error": error}).encode(), "application/json")


def offer_of(content_type: str, body: bytes) -> tuple[str, dict[str, Any]]:
    """A call's SDP offer and the session asked with it: the body itself (`application/sdp`),
    or the form the openai SDK sends (`multipart/form-data`: `sdp`, and `session` as JSON);
    ValueError for anything else."""
    if content_type.split(";", 1)[0].strip().lower() != "multipart/form-data":
        return body.decode("utf-8", "replace"), {}
    form = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    parts: dict[str, bytes] = {}
    for part in form.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            parts[name] = payload
    if "sdp" not in parts:
        raise ValueError("The form has no sdp field.")
    try:
        session = json.loads(parts.get("session") or b"{}")
    except ValueError:
        raise ValueError("The session field is not JSON.") from None
    if not isinstance(session, dict):
        raise ValueError("The session field is not an object.")
    return parts["sdp"].decode("utf-8", "replace"), session


def _type_of(message: str | bytes) -> str | None:
    """A client event's `type`, if it is one (the core parses and answers anything else)."""
    if b"output_audio_buffer" not in (message if isinstance(message, bytes)
                                      else message.encode()):
        return None  # not worth parsing twice: every other event is the core's
    try:
        event = json.loads(message)
    except ValueError:
        return None
    kind = event.get("type") if isinstance(event, dict) else None
    return kind if isinstance(kind, str) else None


class CallHost(Protocol):
    """What a call needs of the emulator (faultlab.emulator.server's `Host`)."""

    api: EmulatedApi

    def announce(self, what: Announcement) -> None: ...
    def connect(self, now: float, api: str = ..., client_port: int | None = None) -> Any: ...


# The server's loop over one connection (`EmulatorServer.drive`): the connection, its wake, how
# a frame is sent, how it is closed.
Send = Callable[[str | bytes, Action], Awaitable[None]]
Close = Callable[[int, str], Awaitable[None]]
Drive = Callable[..., Awaitable[None]]


class Calls:
    """The WebRTC calls of one emulator server (`EmulatorServer.calls`): `host` is its emulator,
    `drive` its loop over a connection."""

    def __init__(self, host: CallHost, drive: Drive) -> None:
        self.host = host
        self.drive = drive
        # Client secrets handed out: the session each was asked with, and when it expires.
        self._secrets: dict[str, tuple[dict[str, Any], float]] = {}
        self._calls: dict[str, Call] = {}

    async def answer(self, request: Posted) -> Response:
        """The answer to a POST on one of the calls' routes."""
        path = "/" + urlsplit(request.path).path.strip("/")
        try:
            return await self._answer(request, path)
        except MultipleValuesError as exc:
            self.host.announce(EmulatorRefused(f"header given twice: {exc}", path=path,
                                               status=400))
            return _error(HTTPStatus.BAD_REQUEST, f"The header {exc} is given more than once.")

    async def _answer(self, request: Posted, path: str) -> Response:
        em = self.host
        query = parse_qs(urlsplit(request.path).query)
        bearer = (request.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        if not em.api.protocol.authorised(request.headers, query):
            em.announce(EmulatorRefused("no key", path=path, status=401))
            return _error(HTTPStatus.UNAUTHORIZED, "You didn't provide an API key.")
        if SECRETS.match(path):
            if bearer.startswith("ek_"):  # a secret is for a call, not for more secrets
                em.announce(EmulatorRefused("client secret for a secret", path=path,
                                            status=401))
                return _error(HTTPStatus.UNAUTHORIZED, "A client secret cannot create one.",
                              "invalid_api_key")
            return self._client_secret(request.body)
        if hung := HANGUP.match(path):
            call = self._calls.get(hung.group(1))
            if call is None:
                return _error(HTTPStatus.NOT_FOUND, "Call not found.", "call_not_found")
            await call.end()
            return _answer(HTTPStatus.OK, b"", "text/plain")
        session: dict[str, Any] = {}
        if bearer.startswith("ek_"):
            known = self._secrets.get(bearer)
            if known is None or known[1] < time.time():
                em.announce(EmulatorRefused("client secret unknown or expired", path=path,
                                            status=401))
                return _error(HTTPStatus.UNAUTHORIZED, "Invalid client secret.",
                              "invalid_api_key")
            session = known[0]
        try:
            offer, asked = offer_of(request.headers.get("content-type") or "", request.body)
        except ValueError as exc:
            em.announce(EmulatorRefused(str(exc), path=path, status=400))
            return _error(HTTPStatus.BAD_REQUEST, str(exc))
        session = {**session, **asked}
        model = str(session.get("model") or query.get("model", [""])[0])
        if "m=application" not in offer:
            em.announce(EmulatorRefused("offer without a data channel", path=path, status=400))
            return _error(HTTPStatus.BAD_REQUEST, "The SDP offer has no data channel.")
        call = Call(self, f"rtc_{secrets.token_hex(16)}", model, session)
        self._calls[call.id] = call
        try:
            sdp = await call.start(offer, request.headers)
        except asyncio.CancelledError:  # websockets' open_timeout, or the server stopping
            await asyncio.shield(call.end())
            raise
        except Exception as exc:  # aiortc's refusal of an offer it cannot read
            await call.end()
            reason = str(exc).split("\n", 1)[0][:120]
            em.announce(EmulatorRefused(f"bad offer: {reason}", path=path, status=400))
            return _error(HTTPStatus.BAD_REQUEST, f"Invalid SDP offer: {reason}")
        return _answer(HTTPStatus.CREATED, sdp.encode(), "application/sdp",
                       {"Location": f"/v1/realtime/calls/{call.id}"})

    def _client_secret(self, body: bytes) -> Response:
        try:
            asked = json.loads(body or b"{}")
            session = dict(asked.get("session") or {})
            ttl = int((asked.get("expires_after") or {}).get("seconds", SECRET_TTL_S))
        except (ValueError, TypeError, AttributeError, OverflowError):
            return _error(HTTPStatus.BAD_REQUEST, "The body is not a client secret request.")
        low, high = SECRET_TTL_RANGE_S
        if not low <= ttl <= high:
            return _error(HTTPStatus.BAD_REQUEST,
                          f"expires_after.seconds must be within {low} and {high}.")
        now = time.time()
        # Expired secrets are forgotten as new ones are made (a run makes a handful).
        self._secrets = {k: v for k, v in self._secrets.items() if v[1] >= now}
        value = f"ek_{secrets.token_hex(16)}"
        expires = now + ttl
        self._secrets[value] = (session, expires)
        out = {"value": value, "expires_at": int(expires), "session": session}
        return _answer(HTTPStatus.OK, json.dumps(out).encode(), "application/json")

    def ended(self, call: Call) -> None:
        self._calls.pop(call.id, None)

    async def close(self) -> None:
        """End every call (the server is stopping)."""
        await asyncio.gather(*(call.end() for call in list(self._calls.values())),
                             return_exceptions=True)


class Call:
    """One call: its peer connection, and the core's connection it carries."""

    def __init__(self, calls: Calls, call_id: str, model: str, session: dict[str, Any]) -> None:
        from faultlab.webrtc import PcmReader, SpeakerTrack, peer_connection

        self.calls = calls
        self.id = call_id
        self.model = model
        self.session = session
        self.pc: RTCPeerConnection = peer_connection()
        self.speaker: SpeakerTrack = SpeakerTrack(drained=self._drained)
        self.mic: PcmReader = PcmReader()  # the user's audio, as it came
        self.channel: RTCDataChannel | None = None
        self.opened = asyncio.Event()  # the events' channel
        self.gone = asyncio.Event()  # the peer connection failed or closed
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.speaking: str | None = None  # the response whose audio the track plays
        self.pair: Any = None  # the candidate pair ICE nominated, once connected
        self.ending = False
        em = calls.host
        self.conn = em.connect(asyncio.get_running_loop().time(), "realtime")

    @property
    def announce(self) -> Any:
        return self.calls.host.announce

    async def start(self, offer: str, headers: Mapping[str, str]) -> str:
        """The answer to `offer`, the call set up behind it."""
        from aiortc import RTCSessionDescription

        pc = self.pc
        pc.on("datachannel", self._channel)
        pc.on("track", self._track)
        pc.on("connectionstatechange", self._state)
        await pc.setRemoteDescription(RTCSessionDescription(offer, "offer"))
        pc.addTrack(self.speaker)
        await pc.setLocalDescription(await pc.createAnswer())
        loop = asyncio.get_running_loop()
        self.conn.begin(f"/v1/realtime?model={self.model}", headers, loop.time())
        if self.session:
            # The client secret's session, applied as the service does before the call's
            # first event (the client sees it in session.updated).
            self.conn.receive(json.dumps({"type": "session.update", "session": self.session}),
                              loop.time())
        self.announce(EmulatorCall(self.conn.number, self.id, "answered"))
        self.tasks.append(asyncio.create_task(self._serve()))
        return pc.localDescription.sdp

    def _channel(self, channel: RTCDataChannel) -> None:
        from faultlab.webrtc import CHANNEL

        if channel.label != CHANNEL:
            return
        self.channel = channel

        @channel.on("message")
        def on_message(message: str | bytes) -> None:
            self._heard(message)

        if channel.readyState == "open":
            self.opened.set()
        else:
            channel.on("open", self.opened.set)

    def _heard(self, message: str | bytes) -> None:
        loop = asyncio.get_running_loop()
        if _type_of(message) == "output_audio_buffer.clear":
            # A call's own event: the core never sees it.
            self.announce(FrameLogged("emulator", "client", self.conn.number,
                                      "output_audio_buffer.clear", len(message)))
            self._cut()
            return
        self.conn.receive(message, loop.time())
        self.wake.set()

    def _track(self, track: Any) -> None:
        if track.kind == "audio":
            self.tasks.append(asyncio.create_task(self._hear(track)))

    async def _hear(self, track: Any) -> None:
        """The user's audio, handed to the core every APPEND_S; then too, whether ICE moved the
        call to another pair (a NAT rebound the user's port: a peer-reflexive one)."""
        from aiortc.mediastreams import MediaStreamError

        from faultlab.webrtc import RATE, nominated_pair, selected_pair

        pending = bytearray()
        loop = asyncio.get_running_loop()
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            pending += self.mic.pcm(frame)
            if len(pending) >= APPEND_S * RATE * 2 and not self.conn.closed:
                if self.pair is not None and (now := nominated_pair(self.pc)) not in (None, self.pair):
                    self.pair = now
                    self.announce(EmulatorCall(self.conn.number, self.id, "moved",
                                               selected_pair(self.pc)))
                audio = base64.b64encode(pending).decode()
                pending.clear()
                self.conn.receive(json.dumps({"type": "input_audio_buffer.append",
                                              "audio": audio}), loop.time())
                self.wake.set()

    async def _state(self) -> None:
        from faultlab.webrtc import nominated_pair, selected_pair

        if self.ending:
            return  # `ended` tells it
        state = self.pc.connectionState
        pair = selected_pair(self.pc) if state == "connected" else None
        if state == "connected":
            self.pair = nominated_pair(self.pc)
        self.announce(EmulatorCall(self.conn.number, self.id, state, pair))
        if state in ("failed", "closed"):
            self.gone.set()
            if not self.conn.closed:
                self.conn.peer_closed(asyncio.get_running_loop().time())
                self.wake.set()

    async def _serve(self) -> None:
        opened = asyncio.ensure_future(self.opened.wait())
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait((opened, gone), timeout=CHANNEL_OPEN_S,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            opened.cancel()
            gone.cancel()
        if not self.opened.is_set():
            if not self.gone.is_set():  # its state told why otherwise
                self.announce(EmulatorCall(self.conn.number, self.id, "no channel"))
            await self.end()
            return
        try:
            await self.calls.drive(self.conn, self.wake, self._send, self._close,
                                   recorded=False, played=PLAYED)
        finally:
            await self.end()

    async def _send(self, wire: str | bytes, action: Action) -> None:
        frame = action.frame or {}
        kind = frame.get("type")
        if kind == "response.output_audio.delta":
            if self.speaking is None:
                self.speaking = str(frame.get("response_id") or "")
                self._tell({"type": "output_audio_buffer.started",
                            "response_id": self.speaking})
            self.speaker.play(base64.b64decode(str(frame.get("delta") or "")))
            return
        if kind == "input_audio_buffer.speech_started":
            self._cut()
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            channel.send(wire)

    def _tell(self, event: dict[str, Any]) -> None:
        """One of the call's own events (the core does not know the track)."""
        wire = json.dumps({"event_id": f"event_{secrets.token_hex(11)}", **event},
                          separators=(",", ":"))
        self.announce(FrameLogged("emulator", "server", self.conn.number, event["type"],
                                  len(wire)))
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            channel.send(wire)

    def _drained(self) -> None:
        if self.speaking is not None:
            self._tell({"type": "output_audio_buffer.stopped", "response_id": self.speaking})
            self.speaking = None

    def _cut(self) -> None:
        """The model's audio not yet played is dropped."""
        self.speaker.clear()
        if self.speaking is not None:
            self._tell({"type": "output_audio_buffer.cleared", "response_id": self.speaking})
            self.speaking = None

    async def _close(self, code: int, reason: str) -> None:
        """The core closes: what it said last (an error, the lifetime's end) is delivered
        first."""
        from faultlab.webrtc import drained

        await drained(self.pc, self.channel)
        await self.end()

    async def end(self) -> None:
        """The call is over: its peer connection closed, its connection gone from the core."""
        if self.ending:
            return
        self.ending = True
        self.calls.ended(self)
        loop = asyncio.get_running_loop()
        self.conn.peer_closed(loop.time())
        self.wake.set()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        await self.pc.close()
        self.announce(EmulatorCall(self.conn.number, self.id, "ended",
                                   heard_s=round(self.mic.received_s, 3),
                                   concealed_s=round(self.mic.concealed_s, 3)))
