"""naive: the field study's plain client: one session, a resume loop, the old call id answered.

It holds the booking conversation (faultlab/scenarios/booking/conversation.py): it asks for the
booking (typed with `--say`, or spoken into the lab's virtual microphone with `--mic`), hands each
tool call to the booking backend, and answers the call (by its id, on whatever connection is up)
when the backend commits. It notices a dead path with its own pings (faultlab/clients/liveness.py:
one every `--ping-interval`; lost when neither a frame nor a pong came for `--lost-after`) or the
SDK's error, then resumes with the last handle: first after `--first-resume`, then `--retry-after`
after each refusal, until one works or `--give-up-after` has passed. Once every booking has
committed (or, with none, once the model has replied) it asks `--ask`, logs the answer, and leaves
when the model has been quiet for `--quiet`. It never opens a new session: when resuming fails,
the user is never told. (field-recovery and racing-recovery are this client with another way to
recover: `Recovery`.)

Events: client.connected, client.tool_call, client.tool_response, client.lost (why),
resume.attempt / resume.refused (code, latency_ms) / resume.ok (latency_ms) / resume.gave_up,
client.ask, client.answer (text), client.audio_start / client.audio_end (per model turn),
client.recovered (the model's first output after a loss), the backend's backend.job /
backend.commit / backend.deduped, and with `--mic` the uplink's uplink.* events.
A lost connection is aborted, unless `--close-old-after` or `--close-old-on-return` keep it to
close it cleanly later (client.old_back, client.old_close, client.old_closed with the echo).
Exit codes: 0 answered; 2 the first connection was refused (client.refused); 3 gave up resuming,
or never answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from typing import Any, Protocol

from faultlab.clients import sdk, uplink
from faultlab.clients.liveness import Liveness, close_parked
from faultlab.clients.options import main, parser_for
from faultlab.clients.uplink import Uplink
from faultlab.events import EventWriter
from faultlab.protocols.gemini import kind_of
from faultlab.scenarios.booking.conversation import TOOL, BookingConversation, Turn

# A set-up connection: the stack that closes it, and the SDK's session on it.
Connection = tuple[AsyncExitStack, Any]


class Recovery(Protocol):
    """What a client does about a lost connection (its command line picks one)."""

    # Whether a new session hears the backend's status lines (only a recovery that opens one).
    status_notes: bool

    def suspect(self, client: NaiveClient, quiet_s: float) -> None:
        """Hears, while the connection is watched, how long it has been quiet."""

    async def before_drop(self, client: NaiveClient) -> None:
        """Runs once a loss is noticed, before the connection is let go."""

    async def recover(self, client: NaiveClient) -> bool:
        """After a loss: a connection installed (True), or given up (False)."""
        ...

    async def leave(self, client: NaiveClient) -> None:
        """Runs as the client leaves."""


class ResumeOnly:
    """naive's recovery: resume with the last handle until `--give-up-after`, nothing else."""

    status_notes = False

    def suspect(self, client: NaiveClient, quiet_s: float) -> None:
        pass

    async def before_drop(self, client: NaiveClient) -> None:
        pass

    async def recover(self, client: NaiveClient) -> bool:
        connection = await client.resume_attempts(time.monotonic(), client.args.give_up_after)
        if connection is None:
            return False
        client.install(*connection)
        return True

    async def leave(self, client: NaiveClient) -> None:
        pass


class NaiveClient:
    def __init__(self, args: argparse.Namespace, events: EventWriter,
                 recovery: Recovery | None = None) -> None:
        from google import genai

        self.args = args
        self.events = events
        self.recovery: Recovery = recovery or ResumeOnly()
        self.conversation = BookingConversation(self, args, events, self.recovery.status_notes)
        self.client = genai.Client()
        self.liveness = Liveness(args.ping_interval, args.lost_after)
        self.handle: str | None = None
        self.session: Any = None
        self.up = asyncio.Event()
        self.lost = asyncio.Event()
        self.speaking = False  # a model turn is under way (output came, turnComplete not yet)
        self.generation = 0  # which session is in use: a new session cannot answer old calls
        self.leaving = False
        self.uplink: Uplink | None = None
        self._stack: AsyncExitStack | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._answer: list[str] = []
        self._audio_s = 0.0
        self._responders: set[asyncio.Task[None]] = set()
        self._last_message = time.monotonic()
        self._lost_at: float | None = None
        self._retry_now = asyncio.Event()  # set when closing the old connection unlocked resuming

    # Connections.

    def _config(self, handle: str | None) -> Any:
        from google.genai import types

        audio = self.args.audio or self.args.mic
        return types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO if audio else types.Modality.TEXT],
            output_audio_transcription=types.AudioTranscriptionConfig() if audio else None,
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name=TOOL, behavior=types.Behavior.NON_BLOCKING,
                parameters=types.Schema(type=types.Type.OBJECT, properties={
                    "slot": types.Schema(type=types.Type.STRING)}))])],
            session_resumption=types.SessionResumptionConfig(handle=handle))

    async def connect(self, handle: str | None) -> Connection:
        """A new connection (resuming `handle`, or a new session), set up but not yet in use."""
        stack = AsyncExitStack()
        try:
            session = await stack.enter_async_context(
                self.client.aio.live.connect(model=self.args.model, config=self._config(handle)))
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stack.aclose(), 1.0)
            raise
        return stack, session

    def install(self, stack: AsyncExitStack, session: Any) -> None:
        """Make a set-up connection the one in use: receive on it, watch it, answer on it."""
        self.session = session
        self._stack = stack
        self.liveness.alive()
        self.speaking = False
        self.lost.clear()
        self.up.set()
        watch = self.liveness.watch(session, lambda: self.session, self.drop,
                                    lambda quiet: self.recovery.suspect(self, quiet))
        self._tasks = [asyncio.create_task(self._receive(session)), asyncio.create_task(watch)]

    async def drop(self, why: str) -> None:
        """The connection is dead (or we declared it so): forget it, without a close handshake,
        or park it to be closed later (`--close-old-after`, `--close-old-on-return`)."""
        if self.lost.is_set() or self.leaving:
            return
        await self.recovery.before_drop(self)
        if self.lost.is_set():
            return
        self.events.emit("client.lost", why=why)
        self._lost_at = time.monotonic()
        self.up.clear()
        self.lost.set()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        stack, self._stack = self._stack, None
        ws = sdk.websocket(self.session)
        parking = self.args.close_old_after is not None or self.args.close_old_on_return
        if parking and sdk.is_open(ws) and stack is not None:
            self.spawn(self._close_parked(ws, stack))
            return
        sdk.abort(ws)
        if stack is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stack.aclose(), 1.0)

    async def _close_parked(self, ws: Any, stack: AsyncExitStack) -> None:
        """Close a parked connection, then retry at once: the close unlocks the session."""
        await close_parked(ws, stack, self.args.close_old_after, self.args.ping_interval,
                           self.args.connect_timeout, self.events)
        self._retry_now.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(stack.aclose(), 1.0)

    async def _receive(self, session: Any) -> None:
        from google.genai import errors

        try:
            while True:
                async for message in session.receive():
                    self._on_message(message)
        except errors.APIError as exc:
            await self.drop(f"{exc.code} {str(exc)[:80]}")
        except Exception as exc:  # the socket died under the SDK
            await self.drop(type(exc).__name__)

    # Messages.

    def _on_message(self, message: Any) -> None:
        now = time.monotonic()
        kind = kind_of(message.model_dump(exclude_none=True))
        self._last_message = now
        self.liveness.alive()
        update = message.session_resumption_update
        if update and update.new_handle:
            self.handle = update.new_handle
        content = message.server_content
        parts = content.model_turn.parts if content and content.model_turn else None
        output = bool(parts or message.tool_call)
        if output:
            self.speaking = True
        if output and self._lost_at is not None:
            self.events.emit("client.recovered", since_loss_s=round(now - self._lost_at, 3),
                             kind=kind)
            self._lost_at = None
        if message.tool_call and message.tool_call.function_calls:
            for call in message.tool_call.function_calls:
                self.events.emit("client.tool_call", id=call.id, name=call.name,
                                 args=dict(call.args or {}))
                self.conversation.on_call(str(call.id), str(call.name), dict(call.args or {}))
        for part in parts or []:
            if part.text:
                self._answer.append(part.text)
            if part.inline_data and part.inline_data.data:
                if self._audio_s == 0.0:
                    self.events.emit("client.audio_start")
                self._audio_s += len(part.inline_data.data) / 2 / 24000
        if content and content.output_transcription and content.output_transcription.text:
            self._answer.append(content.output_transcription.text)
        if content and content.turn_complete:
            self.speaking = False
            if self._audio_s:
                self.events.emit("client.audio_end", audio_s=round(self._audio_s, 3))
                self._audio_s = 0.0
            if self._answer:
                self.events.emit("client.answer", text=" ".join(self._answer))
                self._answer = []
                self.conversation.on_reply()
        if kind not in ("session_resumption_update", "usage_metadata"):
            self.events.emit("client.received", kind=kind)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._responders.add(task)
        task.add_done_callback(self._responders.discard)

    async def say(self, turns: list[Turn], turn_complete: bool) -> None:
        from google.genai import types

        await self.session.send_client_content(turns=[
            types.Content(role=role, parts=[types.Part(text=text)]) for role, text in turns],
            turn_complete=turn_complete)

    async def send_audio(self, pcm: bytes) -> None:
        from google.genai import types

        await self.session.send_realtime_input(
            audio=types.Blob(data=pcm, mime_type=f"audio/pcm;rate={uplink.RATE}"))

    async def end_audio(self) -> None:
        await self.session.send_realtime_input(audio_stream_end=True)

    async def answer_call(self, call_id: str, name: str, response: dict[str, Any]) -> None:
        from google.genai import types

        await self.session.send_tool_response(function_responses=[
            types.FunctionResponse(id=call_id, name=name, response=response)])

    # Resuming.

    async def _pause(self, lost_at: float, window_s: float) -> None:
        """Wait before the next attempt, but not past the end of the window."""
        left = window_s - (time.monotonic() - lost_at)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._retry_now.wait(), max(0.0, min(self.args.retry_after, left)))
        self._retry_now.clear()

    async def resume_attempts(self, lost_at: float, window_s: float) -> Connection | None:
        """Resume attempts with the last handle until one is set up (returned, not installed) or
        `window_s` since the loss has passed (None)."""
        from google.genai import errors

        await asyncio.sleep(self.args.first_resume)
        attempt = 0
        while time.monotonic() - lost_at < window_s:
            attempt += 1
            started = time.monotonic()
            self.events.emit("resume.attempt", n=attempt,
                             since_loss_s=round(started - lost_at, 3))
            try:
                connection = await asyncio.wait_for(self.connect(self.handle),
                                                    self.args.connect_timeout)
            except errors.APIError as exc:
                self.events.emit("resume.refused", n=attempt, code=exc.code,
                                 latency_ms=round((time.monotonic() - started) * 1000, 1))
                await self._pause(lost_at, window_s)
                continue
            except (OSError, TimeoutError) as exc:
                self.events.emit("resume.refused", n=attempt, code=None, error=type(exc).__name__,
                                 latency_ms=round((time.monotonic() - started) * 1000, 1))
                await self._pause(lost_at, window_s)
                continue
            self.events.emit("resume.ok", n=attempt,
                             latency_ms=round((time.monotonic() - started) * 1000, 1),
                             since_loss_s=round(time.monotonic() - lost_at, 3))
            return connection
        self.events.emit("resume.gave_up", attempts=attempt)
        return None

    # The run.

    async def _leave(self) -> None:
        await self.recovery.leave(self)
        self.leaving = True
        if self._stack is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stack.aclose(), 2.0)

    async def run(self) -> int:
        from google.genai import errors

        talk = self.conversation
        try:
            self.install(*await self.connect(None))
        except errors.APIError as exc:
            self.events.emit("client.refused", code=exc.code, reason=str(exc)[:200])
            return 2
        except OSError as exc:  # unreachable, reset, TLS refused: no WebSocket at all
            self.events.emit("client.refused", code=None, reason=f"{type(exc).__name__}: {exc}")
            return 2
        self.events.emit("client.connected")
        if self.args.mic:
            self.uplink = Uplink(self, self.args.keep_alive, self.args.stream_end, self.events)
            self.spawn(self.uplink.run())
        else:
            await self.say(talk.opening(), turn_complete=True)
        deadline = time.monotonic() + self.args.duration
        try:
            while time.monotonic() < deadline:
                if self.lost.is_set():
                    if not await self.recovery.recover(self):
                        return 3
                    continue
                if talk.ask_due(self.speaking):
                    await talk.ask(lambda: self.speaking)
                    continue
                if talk.done() and time.monotonic() - self._last_message > self.args.quiet:
                    # Answered, and nothing more is coming: the model may speak twice (the tool's
                    # result, then the answer) when both waited behind a frozen path.
                    await self._leave()
                    return 0
                await asyncio.sleep(0.05)
            return 0 if talk.done() else 3
        finally:
            for task in list(self._responders):
                task.cancel()
            talk.close()


def cli() -> None:
    main(NaiveClient, parser_for(__doc__))


if __name__ == "__main__":
    cli()
