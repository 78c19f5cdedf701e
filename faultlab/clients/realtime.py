"""openai-naive and openai-recovery: the booking conversation on the official `openai` SDK's
Realtime client (`client.realtime.connect(model=...)`), configured by the environment only.

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
import contextlib
import json
import time
from collections.abc import Coroutine
from typing import Any

import numpy as np

from faultlab.clients import sdk, uplink
from faultlab.clients.liveness import Liveness
from faultlab.clients.options import main, parser_for
from faultlab.clients.uplink import Uplink
from faultlab.events import EventWriter
from faultlab.protocols.openai import AUDIO_RATE
from faultlab.scenarios.booking.conversation import (
    TOOL,
    TOOL_PARAMETERS,
    BookingConversation,
    Turn,
)
from faultlab.speech import resample
from faultlab.units import parse_duration

# The events that say nothing a run looks at (the stream's bookkeeping), left out of
# client.received.
QUIET_KINDS = ("response.output_audio.delta", "response.output_audio_transcript.delta",
               "response.output_text.delta", "response.function_call_arguments.delta",
               "rate_limits.updated")


class Refused(Exception):
    """The service would not open a session: its in-band error (code) or its close."""

    def __init__(self, code: str | int | None, reason: str) -> None:
        super().__init__(reason)
        self.code = code


class RealtimeClient:
    """The booking conversation on one OpenAI Realtime connection at a time."""

    def __init__(self, args: argparse.Namespace, events: EventWriter, reconnect: bool) -> None:
        from openai import AsyncOpenAI

        self.args = args
        self.events = events
        self.reconnect = reconnect
        self.conversation = BookingConversation(self, args, events, status_notes=reconnect)
        self.client = AsyncOpenAI()
        self.liveness = Liveness(args.ping_interval, args.lost_after)
        self.session: Any = None  # the SDK's connection in use
        self.up = asyncio.Event()
        self.lost = asyncio.Event()
        self.idle = asyncio.Event()  # no response under way
        self.idle.set()
        self.generation = 0
        self.leaving = False
        self._tasks: list[asyncio.Task[None]] = []
        self._responders: set[asyncio.Task[None]] = set()
        self._answer: list[str] = []
        self._audio_s = 0.0
        self._last_event = time.monotonic()
        self._lost_at: float | None = None

    # Connections.

    def _session_settings(self) -> Any:
        return {"type": "realtime", "output_modalities": ["audio" if self.args.audio else "text"],
                "tools": [{"type": "function", "name": TOOL, "description": "Book a slot.",
                           "parameters": TOOL_PARAMETERS}]}

    async def connect(self) -> Any:
        """A new connection, its session set up (`session.created`, then our settings), not yet
        in use; Refused when the service says no."""
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
        return conn

    def install(self, conn: Any) -> None:
        self.session = conn
        self.liveness.alive()
        self.idle.set()
        self.lost.clear()
        self.up.set()
        watch = self.liveness.watch(conn, lambda: self.session, self.drop, lambda quiet: None)
        self._tasks = [asyncio.create_task(self._receive(conn)), asyncio.create_task(watch)]

    async def drop(self, why: str) -> None:
        """The connection is dead (or declared so): let it go without a close handshake."""
        if self.lost.is_set() or self.leaving:
            return
        self.events.emit("client.lost", why=why)
        self._lost_at = time.monotonic()
        # What the lost response had said is no answer: a new session answers anew.
        self._answer, self._audio_s = [], 0.0
        self.up.clear()
        self.lost.set()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        sdk.abort(sdk.websocket(self.session))

    async def _receive(self, conn: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for event in conn:
                self._on_event(event)
            await self.drop("closed")
        except ConnectionClosed as exc:
            rcvd = exc.rcvd
            await self.drop(f"closed {rcvd.code} {rcvd.reason[:80]}" if rcvd else "closed")
        except Exception as exc:  # the socket died under the SDK
            await self.drop(type(exc).__name__)

    # Events.

    def _on_event(self, event: Any) -> None:
        now = time.monotonic()
        kind = event.type
        self._last_event = now
        self.liveness.alive()
        output = kind in ("response.output_audio.delta", "response.output_text.delta",
                          "response.output_audio_transcript.delta",
                          "response.function_call_arguments.done")
        if output and self._lost_at is not None:
            self.events.emit("client.recovered", since_loss_s=round(now - self._lost_at, 3),
                             kind=kind)
            self._lost_at = None
        if kind == "response.created":
            self.idle.clear()
        elif kind == "response.function_call_arguments.done":
            args = json.loads(event.arguments or "{}")
            self.events.emit("client.tool_call", id=event.call_id, name=event.name, args=args)
            self.conversation.on_call(str(event.call_id), str(event.name), args)
        elif kind in ("response.output_text.delta", "response.output_audio_transcript.delta"):
            self._answer.append(event.delta)
        elif kind == "response.output_audio.delta":
            if self._audio_s == 0.0:
                self.events.emit("client.audio_start")
            self._audio_s += len(event.delta) * 3 / 4 / 2 / 24000
        elif kind == "response.done":
            self._response_done(event.response.status)
        elif kind == "error":
            self.events.emit("client.error", code=event.error.code,
                             message=str(event.error.message)[:200])
            self.idle.set()  # what we asked for may have been refused: no response is coming
        if kind not in QUIET_KINDS:
            self.events.emit("client.received", kind=kind)

    def _response_done(self, status: str | None) -> None:
        self.idle.set()
        if self._audio_s:
            self.events.emit("client.audio_end", audio_s=round(self._audio_s, 3))
            self._audio_s = 0.0
        if status == "cancelled":  # cut short: what it had said is no answer
            self._answer = []
        if self._answer:
            self.events.emit("client.answer", text="".join(self._answer))
            self._answer = []
            self.conversation.on_reply()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._responders.add(task)
        task.add_done_callback(self._responders.discard)

    @property
    def speaking(self) -> bool:
        return not self.idle.is_set()

    async def _respond(self) -> None:
        """response.create, once the response under way (if any) is done: the service refuses
        a second one."""
        await self.idle.wait()
        self.idle.clear()  # until its response.created (or an error) comes
        await self.session.response.create()

    async def say(self, turns: list[Turn], turn_complete: bool) -> None:
        for role, text in turns:
            await self.session.conversation.item.create(item={
                "type": "message", "role": role,
                "content": [{"type": "input_text", "text": text}]})
        if turn_complete:
            await self._respond()

    async def send_audio(self, pcm: bytes) -> None:
        samples = np.frombuffer(pcm, dtype="<i2")
        pcm24 = resample(samples, uplink.RATE, AUDIO_RATE).astype("<i2").tobytes()
        await self.session.input_audio_buffer.append(audio=base64.b64encode(pcm24).decode())

    async def end_audio(self) -> None:
        pass  # OpenAI Realtime has no end of stream: server VAD ends turns on silence

    async def answer_call(self, call_id: str, name: str, response: dict[str, Any]) -> None:
        await self.session.conversation.item.create(item={
            "type": "function_call_output", "call_id": call_id, "output": json.dumps(response)})
        await self._respond()

    # Recovering.

    async def recover(self) -> bool:
        """openai-recovery: connect again until `--give-up-after` since the loss, then replay the
        conversation into the new session; openai-naive: give up."""
        if not self.reconnect:
            return False
        lost_at = time.monotonic()
        attempt = 0
        while time.monotonic() - lost_at < self.args.give_up_after:
            attempt += 1
            self.events.emit("recovery.attempt", n=attempt,
                             since_loss_s=round(time.monotonic() - lost_at, 3))
            try:
                conn = await self.connect()
            except (Refused, OSError, TimeoutError) as exc:
                self.events.emit("recovery.failed", n=attempt, error=f"{type(exc).__name__}: "
                                 f"{str(exc)[:80]}")
                await asyncio.sleep(self.args.retry_after)
                continue
            self.generation += 1
            self.install(conn)
            self.events.emit("recovery.new_session",
                             since_loss_s=round(time.monotonic() - lost_at, 3))
            turns, ask, lines, reply = self.conversation.restore()
            await self.say(turns, turn_complete=reply)
            if ask:
                self.conversation.mark_asked()
            self.events.emit("recovery.restored", lines=lines, asked=ask)
            return True
        return False

    # The run.

    async def _leave(self) -> None:
        self.leaving = True
        ws = sdk.websocket(self.session)
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(1000), 2.0)

    async def run(self) -> int:
        talk = self.conversation
        try:
            self.install(await self.connect())
        except Refused as exc:
            self.events.emit("client.refused", code=exc.code, reason=str(exc)[:200])
            return 2
        except (OSError, TimeoutError) as exc:  # unreachable, reset, TLS refused
            self.events.emit("client.refused", code=None, reason=f"{type(exc).__name__}: {exc}")
            return 2
        self.events.emit("client.connected")
        if self.args.mic:
            self.spawn(Uplink(self, self.args.keep_alive, self.args.stream_end, self.events).run())
        else:
            await self.say(talk.opening(), turn_complete=True)
        deadline = time.monotonic() + self.args.duration
        try:
            while time.monotonic() < deadline:
                if self.lost.is_set():
                    if talk.done():
                        return 0  # the user has the answer: what the connection does no longer matters
                    if not await self.recover():
                        return 3
                    continue
                if talk.ask_due(self.speaking):
                    await talk.ask(lambda: self.speaking)
                    continue
                if talk.done() and time.monotonic() - self._last_event > self.args.quiet:
                    await self._leave()
                    return 0
                await asyncio.sleep(0.05)
            return 0 if talk.done() else 3
        finally:
            for task in list(self._responders):
                task.cancel()
            talk.close()


def parser(doc: str | None, give_up_after_s: float) -> argparse.ArgumentParser:
    p = parser_for(doc)
    p.set_defaults(model="gpt-realtime", give_up_after=give_up_after_s)
    p.add_argument("--window", dest="give_up_after", type=parse_duration,
                   help="how long to try connecting again after a loss")
    return p


def naive_cli() -> None:
    main(lambda args, events: RealtimeClient(args, events, reconnect=False), parser(__doc__, 0.0))


def recovery_cli() -> None:
    main(lambda args, events: RealtimeClient(args, events, reconnect=True), parser(__doc__, 30.0))
