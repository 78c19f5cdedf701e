"""openai-naive and openai-recovery: the booking conversation on the official `openai` SDK's
Realtime client (`client.realtime.connect(model=...)`), configured by the environment only: the
conversation loop (faultlab/clients/driver.py) over OpenAI Realtime's transport.

OpenAI Realtime has no resumption: a lost connection loses its session. `openai-naive` notices
the loss (its own pings unanswered, or the connection's end) and gives up: the user is never told
whether the booking went through. `openai-recovery` connects again, which opens a new, empty
session, and replays the conversation into it as items: the request and one status line per
booking, taken from the backend (not from memory), and the question once every booking has
committed; a call the old session made is answered exactly once, by the backend's status line in
the new session (its call id died with the old one).

A function call is answered with a `function_call_output` item and `response.create`, once the
response under way is done. Events: the Gemini reference clients' (client.connected,
client.tool_call, client.tool_response, client.lost (why), client.ask, client.answer (text),
client.audio_start / client.audio_end, client.recovered, client.received (kind), the backend's),
with client.error (code, message) for an in-band error, and, for openai-recovery,
recovery.attempt / recovery.failed / recovery.new_session (since_loss_s) / recovery.restored
(lines, asked). Exit codes: 0 answered; 2 the first connection was refused (client.refused); 3
gave up, or never answered.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from faultlab.clients import sdk, uplink
from faultlab.clients.driver import Connection, Heard, Recovery, ReferenceClient, Refused
from faultlab.clients.options import main, parser_for
from faultlab.events import EventWriter
from faultlab.protocols.openai import AUDIO_RATE
from faultlab.scenarios.booking.conversation import Turn
from faultlab.scenarios.booking.script import SCRIPT
from faultlab.speech import resample
from faultlab.units import parse_duration

# The events that say nothing a run looks at (the stream's bookkeeping), left out of
# client.received.
QUIET_KINDS = ("response.output_audio.delta", "response.output_audio_transcript.delta",
               "response.output_text.delta", "response.function_call_arguments.delta",
               "rate_limits.updated")
# The events that are the model's output (a loss ends with the first: client.recovered).
OUTPUT_KINDS = ("response.output_audio.delta", "response.output_text.delta",
                "response.output_audio_transcript.delta", "response.function_call_arguments.done")


def booking_session(audio: bool) -> dict[str, Any]:
    """The booking's session settings: spoken (`audio`) or written replies, the booking tool."""
    return {"type": "realtime", "output_modalities": ["audio" if audio else "text"],
            "tools": [{"type": "function", "name": SCRIPT.tool,
                       "description": SCRIPT.tool_description,
                       "parameters": SCRIPT.tool_parameters}]}


class RealtimeTransport:
    """OpenAI Realtime on the openai SDK: no resumption, a lost connection loses its session;
    one response at a time."""

    resumable = False
    joiner = ""

    def __init__(self, args: argparse.Namespace) -> None:
        from openai import AsyncOpenAI

        self.args = args
        self.client = AsyncOpenAI()
        self.idle = asyncio.Event()  # no response under way
        self.idle.set()

    def _session_settings(self) -> Any:
        return booking_session(self.args.audio)

    async def connect(self, handle: str | None) -> Connection:
        """A new connection (OpenAI resumes nothing: `handle` is never one), its session set up
        (`session.created`, then our settings)."""
        from websockets.exceptions import ConnectionClosed

        manager = self.client.realtime.connect(model=self.args.model)
        conn = await asyncio.wait_for(manager.__aenter__(), self.args.connect_timeout)
        try:
            async with asyncio.timeout(self.args.connect_timeout):
                first = await conn.recv()
                if first.type == "error":
                    raise Refused(first.error.code, first.error.message)
                await conn.session.update(session=self._session_settings())
        except ConnectionClosed as exc:
            sdk.abort(sdk.websocket(conn))
            rcvd = exc.rcvd
            raise Refused(rcvd.code if rcvd else None, rcvd.reason if rcvd else "closed") from None
        except BaseException:
            sdk.abort(sdk.websocket(conn))
            raise
        return None, conn

    async def messages(self, session: Any) -> AsyncIterator[Heard]:
        async for event in session:
            yield heard(event)

    def why_lost(self, error: Exception) -> str:
        from websockets.exceptions import ConnectionClosed

        if isinstance(error, ConnectionClosed):
            rcvd = error.rcvd
            return f"closed {rcvd.code} {rcvd.reason[:80]}" if rcvd else "closed"
        return type(error).__name__

    async def _respond(self, session: Any) -> None:
        """response.create, once the response under way (if any) is done: the service refuses
        a second one."""
        await self.idle.wait()
        self.idle.clear()  # until its response.created (or an error) comes
        await session.response.create()

    async def say(self, session: Any, turns: list[Turn], turn_complete: bool) -> None:
        for role, text in turns:
            await session.conversation.item.create(item={
                "type": "message", "role": role,
                "content": [{"type": "input_text", "text": text}]})
        if turn_complete:
            await self._respond(session)

    async def answer_call(self, session: Any, call_id: str, name: str,
                          response: dict[str, Any]) -> None:
        await session.conversation.item.create(item={
            "type": "function_call_output", "call_id": call_id, "output": json.dumps(response)})
        await self._respond(session)

    async def send_audio(self, session: Any, pcm: bytes) -> None:
        samples = np.frombuffer(pcm, dtype="<i2")
        pcm24 = resample(samples, uplink.RATE, AUDIO_RATE).astype("<i2").tobytes()
        await session.input_audio_buffer.append(audio=base64.b64encode(pcm24).decode())

    async def end_audio(self, session: Any) -> None:
        pass  # OpenAI Realtime has no end of stream: server VAD ends turns on silence

    async def close(self, connection: Connection) -> None:
        ws = sdk.websocket(connection[1])
        if ws is not None:
            await ws.close(1000)


def heard(event: Any) -> Heard:
    """An OpenAI Realtime server event, in the loop's words."""
    kind = event.type
    said = Heard(kind, quiet=kind in QUIET_KINDS, output=kind in OUTPUT_KINDS)
    if kind == "response.created":
        said.speaking = True
    elif kind == "response.function_call_arguments.done":
        said.calls.append((event.call_id, event.name, json.loads(event.arguments or "{}")))
    elif kind in ("response.output_text.delta", "response.output_audio_transcript.delta"):
        said.text.append(event.delta)
    elif kind == "response.output_audio.delta":
        said.audio, said.audio_s = True, len(event.delta) * 3 / 4 / 2 / AUDIO_RATE
    elif kind == "response.done":
        said.speaking, said.turn_end = False, True
        said.cancelled = event.response.status == "cancelled"
    elif kind == "error":
        # What we asked for may have been refused: no response is coming.
        said.speaking, said.error = False, (event.error.code, str(event.error.message))
    return said


class Reconnect(Recovery):
    """openai-recovery's recovery: a new session, connected again every `--retry-after` until
    `--window`, restored with the conversation; openai-naive's (`reconnect` off): give up."""

    def __init__(self, reconnect: bool) -> None:
        self.reconnect = reconnect
        self.status_notes = reconnect

    async def recover(self, client: ReferenceClient) -> bool:
        if not self.reconnect:
            return False
        lost_at = time.monotonic()
        connection = await client.new_sessions(lost_at)
        if connection is None:
            return False
        await client.restore(connection, lost_at)
        return True


def parser(doc: str | None, give_up_after_s: float) -> argparse.ArgumentParser:
    p = parser_for(doc)
    p.set_defaults(model=SCRIPT.models["openai"], give_up_after=give_up_after_s)
    p.add_argument("--window", dest="give_up_after", type=parse_duration,
                   help="how long to try connecting again after a loss")
    return p


def realtime(reconnect: bool) -> Any:
    def client(args: argparse.Namespace, events: EventWriter) -> ReferenceClient:
        return ReferenceClient(args, events, RealtimeTransport(args), Reconnect(reconnect))
    return client


def naive_cli() -> None:
    main(realtime(reconnect=False), parser(__doc__, 0.0))


def recovery_cli() -> None:
    main(realtime(reconnect=True), parser(__doc__, 30.0))
