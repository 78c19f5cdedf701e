"""naive: the field study's plain client: one session, a resume loop, the old call id answered.

It asks for the booking (typed with `--say`, or spoken into the lab's virtual microphone with
`--mic`), hands each tool call to the booking backend, and answers the call (by its id, on
whatever connection is up) when the backend commits. It notices a dead path with its own pings
(one every `--ping-interval`; lost when neither a frame nor a pong came for `--lost-after`) or the
SDK's error, then resumes with the last handle: first after `--first-resume`, then
`--retry-after` after each refusal, until one works or `--give-up-after` has passed. Once every
booking has committed (or, with none, once the model has replied) it asks `--ask`, logs the
answer, and leaves when the model has been quiet for `--quiet`. It never opens a new session:
when resuming fails, the user is never told.

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
import os
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from faultlab.clients.uplink import Uplink
from faultlab.events import EventWriter
from faultlab.livewire import kind_of
from faultlab.scenarios.booking.backend import Booking, BookingBackend
from faultlab.units import parse_duration

WATCH_TICK_S = 0.05
# A set-up connection: the stack that closes it, and the SDK's session on it.
Connection = tuple[AsyncExitStack, Any]


def answered(pong_waiter: asyncio.Future[Any]) -> bool:
    """Whether a ping's waiter ended with its pong (not cancelled or failed by a close)."""
    return not pong_waiter.cancelled() and pong_waiter.exception() is None


class NaiveClient:
    def __init__(self, args: argparse.Namespace, events: EventWriter) -> None:
        from google import genai

        self.args = args
        self.events = events
        run_dir = os.environ.get("FAULTLAB_RUN_DIR")
        self.backend = BookingBackend(args.commit, args.time_scale,
                                      Path(run_dir) / "ledger.json" if run_dir else None, events)
        self.client = genai.Client()
        self.handle: str | None = None
        self.session: Any = None
        self.up = asyncio.Event()
        self.lost = asyncio.Event()
        self.answered = asyncio.Event()
        self.asked = False
        self.replied = False
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
        self._last_alive = time.monotonic()
        self._lost_at: float | None = None
        self._retry_now = asyncio.Event()  # set when closing the old connection unlocked resuming

    # Connections.

    def _config(self, handle: str | None) -> Any:
        from google.genai import types

        tool = types.Tool(function_declarations=[types.FunctionDeclaration(
            name="book_slot", behavior=types.Behavior.NON_BLOCKING,
            parameters=types.Schema(type=types.Type.OBJECT,
                                    properties={"slot": types.Schema(type=types.Type.STRING)}))])
        audio = self.args.audio or self.args.mic
        return types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO if audio else types.Modality.TEXT],
            output_audio_transcription=types.AudioTranscriptionConfig() if audio else None,
            tools=[tool], session_resumption=types.SessionResumptionConfig(handle=handle))

    async def _connect(self, handle: str | None) -> Connection:
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

    def _install(self, stack: AsyncExitStack, session: Any) -> None:
        """Make a set-up connection the one in use: receive on it, watch it, answer on it."""
        self.session = session
        self._stack = stack
        self._last_alive = time.monotonic()
        self.speaking = False
        self.lost.clear()
        self.up.set()
        self._tasks = [asyncio.create_task(self._receive(session)),
                       asyncio.create_task(self._watch(session))]

    async def _open(self, handle: str | None) -> None:
        self._install(*await self._connect(handle))

    async def _drop(self, why: str) -> None:
        """The connection is dead (or we declared it so): forget it, without a close handshake,
        or park it to be closed later (`--close-old-after`, `--close-old-on-return`)."""
        if self.lost.is_set() or self.leaving:
            return
        self.events.emit("client.lost", why=why)
        self._lost_at = time.monotonic()
        self.up.clear()
        self.lost.set()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        stack, self._stack = self._stack, None
        ws = getattr(self.session, "_ws", None)
        parking = self.args.close_old_after is not None or self.args.close_old_on_return
        if parking and ws is not None and ws.state.name == "OPEN" and stack is not None:
            self._spawn(self._tend_old(ws, stack))
            return
        if ws is not None and ws.transport is not None:
            ws.transport.abort()
        if stack is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stack.aclose(), 1.0)

    async def _tend_old(self, ws: Any, stack: AsyncExitStack) -> None:
        """Close a parked connection (1000) `--close-old-after` after the loss was noticed, or
        once it shows life again (a pong); then retry at once: the close unlocks the session."""
        lost_at = time.monotonic()
        if self.args.close_old_after is not None:
            await asyncio.sleep(self.args.close_old_after)
        else:
            back = asyncio.Event()

            def pong(waiter: asyncio.Future[Any]) -> None:
                if answered(waiter):
                    back.set()

            while not back.is_set():
                with contextlib.suppress(Exception):
                    (await ws.ping()).add_done_callback(pong)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(back.wait(), self.args.ping_interval)
            self.events.emit("client.old_back", since_loss_s=round(time.monotonic() - lost_at, 3))
        started = time.monotonic()
        self.events.emit("client.old_close", code=1000)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(1000), self.args.connect_timeout)
        echo = ws.protocol.close_rcvd
        self.events.emit("client.old_closed", echoed=echo.code if echo else None,
                         echo_ms=round((time.monotonic() - started) * 1000, 1))
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
            await self._drop(f"{exc.code} {str(exc)[:80]}")
        except Exception as exc:  # the socket died under the SDK
            await self._drop(type(exc).__name__)

    async def _watch(self, session: Any) -> None:
        """Own pings: one every ping interval; lost when nothing (frame or pong) came for
        `--lost-after`, checked every 50 ms so detection is 1.5-2.0 s as in the field."""
        ws = session._ws
        pinged = 0.0
        while True:
            now = time.monotonic()
            if now - pinged >= self.args.ping_interval:
                try:
                    waiter = await ws.ping()
                except Exception:
                    return  # the connection is closing: the receiver reports it
                waiter.add_done_callback(lambda f, s=session: self._pong(f, s))
                pinged = now
            quiet = now - self._last_alive
            if quiet > self.args.lost_after:
                await self._drop("pings unanswered")
                return
            self._suspect(quiet)
            await asyncio.sleep(WATCH_TICK_S)

    def _pong(self, waiter: asyncio.Future[Any], session: Any) -> None:
        """A pong is a sign of life of the connection in use (not of one given up on)."""
        if session is self.session and answered(waiter):
            self._last_alive = time.monotonic()

    def _suspect(self, quiet_s: float) -> None:
        """Called while watching with how long the connection has been quiet (a hook)."""

    # Messages.

    def _on_message(self, message: Any) -> None:
        now = time.monotonic()
        kind = kind_of(message.model_dump(exclude_none=True))
        self._last_message = self._last_alive = now
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
                booking = self.backend.book(str(call.id), str((call.args or {}).get("slot", "")))
                self._spawn(self._respond(str(call.id), str(call.name), booking))
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
                self.replied = True
                if self.asked:
                    self.answered.set()
        if kind not in ("session_resumption_update", "usage_metadata"):
            self.events.emit("client.received", kind=kind)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._responders.add(task)
        task.add_done_callback(self._responders.discard)

    async def _respond(self, call_id: str, name: str, booking: Booking) -> None:
        """Answer a call by its id once the backend has committed, on whatever connection of its
        session is up; a call whose session is gone goes to `_call_outlived`."""
        from google.genai import types

        born = self.generation
        await self.backend.committed(booking)
        if not self.args.answer:
            return
        await asyncio.sleep(self.args.respond_delay)
        while True:
            await self.up.wait()
            if self.generation != born:
                await self._call_outlived(booking)
                return
            try:
                await self.session.send_tool_response(function_responses=[types.FunctionResponse(
                    id=call_id, name=name,
                    response={"status": booking.status, "booking": booking.id})])
                self.events.emit("client.tool_response", id=call_id, booking=booking.id)
                return
            except Exception:
                await self._drop("send failed")

    async def _call_outlived(self, booking: Booking) -> None:
        """A call's session was replaced by a new one, which cannot answer it (a hook)."""

    async def _say(self, turns: list[tuple[str, str]], turn_complete: bool) -> None:
        from google.genai import types

        await self.session.send_client_content(turns=[
            types.Content(role=role, parts=[types.Part(text=text)]) for role, text in turns],
            turn_complete=turn_complete)

    # Resuming.

    async def _pause(self, lost_at: float, window_s: float) -> None:
        """Wait before the next attempt, but not past the end of the window."""
        left = window_s - (time.monotonic() - lost_at)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._retry_now.wait(), max(0.0, min(self.args.retry_after, left)))
        self._retry_now.clear()

    async def _resume_attempts(self, lost_at: float, window_s: float) -> Connection | None:
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
                connection = await asyncio.wait_for(self._connect(self.handle),
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

    async def _recover(self) -> bool:
        """After a loss: resume, or give up (False)."""
        connection = await self._resume_attempts(time.monotonic(), self.args.give_up_after)
        if connection is None:
            return False
        self._install(*connection)
        return True

    # The conversation.

    def _ask_due(self) -> bool:
        """Time to ask: the model is not speaking, and every booking has committed, or (none
        asked for) the model has replied."""
        if self.asked or not self.args.ask or self.speaking:
            return False
        bookings = self.backend.ledger.bookings
        if bookings:
            return all(b.status == "committed" for b in bookings)
        return self.replied

    def _mark_asked(self) -> None:
        self.asked = True
        self.answered.clear()
        self.events.emit("client.ask", text=self.args.ask)

    async def _ask(self) -> None:
        with contextlib.suppress(TimeoutError):  # a loss meanwhile is handled first
            await asyncio.wait_for(self.lost.wait(), self.args.ask_after)
        if self.up.is_set() and self._ask_due():
            with contextlib.suppress(Exception):
                await self._say([("user", self.args.ask)], turn_complete=True)
                self._mark_asked()

    def _done(self) -> bool:
        """The user has the answer (or, asking nothing, the model's reply)."""
        return self.answered.is_set() or (self.replied and not self.args.ask)

    async def _leave(self) -> None:
        self.leaving = True
        if self._stack is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stack.aclose(), 2.0)

    async def run(self) -> int:
        from google.genai import errors

        try:
            await self._open(None)
        except errors.APIError as exc:
            self.events.emit("client.refused", code=exc.code, reason=str(exc)[:200])
            return 2
        except OSError as exc:  # unreachable, reset, TLS refused: no WebSocket at all
            self.events.emit("client.refused", code=None, reason=f"{type(exc).__name__}: {exc}")
            return 2
        self.events.emit("client.connected")
        if self.args.mic:
            self.uplink = Uplink(self, self.args.keep_alive, self.args.stream_end, self.events)
            self._spawn(self.uplink.run())
        else:
            await self._say([("user", self.args.say)], turn_complete=True)
        deadline = time.monotonic() + self.args.duration
        try:
            while time.monotonic() < deadline:
                if self.lost.is_set():
                    if not await self._recover():
                        return 3
                    continue
                if self._ask_due():
                    await self._ask()
                    continue
                if self._done() and time.monotonic() - self._last_message > self.args.quiet:
                    # Answered, and nothing more is coming: the model may speak twice (the tool's
                    # result, then the answer) when both waited behind a frozen path.
                    await self._leave()
                    return 0
                await asyncio.sleep(0.05)
            return 0 if self._done() else 3
        finally:
            for task in list(self._responders):
                task.cancel()
            self.backend.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the naive client (and of the clients built on it)."""
    p.add_argument("--say", default="Book me the 3pm slot tomorrow, please.")
    p.add_argument("--ask", default="Did you book it?", help="the question ('' for none)")
    p.add_argument("--ask-after", type=parse_duration, default=1.0,
                   help="how long after the booking commits (or the model replies) to ask")
    p.add_argument("--no-answer", dest="answer", action="store_false",
                   help="never send the tool response (field R2)")
    p.add_argument("--respond-delay", type=parse_duration, default=0.0,
                   help="how long after the backend commits to send the tool response")
    p.add_argument("--close-old-after", type=parse_duration, default=None,
                   help="keep a lost connection and close it (1000) this long after noticing "
                        "the loss")
    p.add_argument("--close-old-on-return", action="store_true",
                   help="keep a lost connection and close it (1000) once it answers a ping")
    p.add_argument("--audio", action="store_true",
                   help="ask for spoken replies (24 kHz audio with a transcript)")
    p.add_argument("--mic", action="store_true",
                   help="speak through the lab's microphone (FAULTLAB_MIC) instead of typing")
    p.add_argument("--keep-alive", choices=["source", "uplink"], default="source",
                   help="with --mic: send silence while the microphone stalls, keyed on the "
                        "source's arrival (right) or on the uplink's sends (the mistake: a held "
                        "back uplink then gets silence mixed into speech)")
    p.add_argument("--no-keep-alive", dest="keep_alive", action="store_const", const=None,
                   help="with --mic: send only what the microphone hands over (no silence "
                        "while it stalls)")
    p.add_argument("--stream-end", action="store_true",
                   help="with --mic: send audioStreamEnd when the microphone ends")
    p.add_argument("--commit", type=parse_duration, default=4.0, help="backend job length")
    p.add_argument("--time-scale", type=float, default=1.0, help="factor on the backend's job")
    p.add_argument("--first-resume", type=parse_duration, default=0.0)
    p.add_argument("--retry-after", type=parse_duration, default=1.0)
    p.add_argument("--give-up-after", type=parse_duration, default=60.0)
    p.add_argument("--connect-timeout", type=parse_duration, default=5.0,
                   help="a resume attempt that has not connected by then counts as refused")
    p.add_argument("--ping-interval", type=parse_duration, default=0.5)
    p.add_argument("--lost-after", type=parse_duration, default=2.0)
    p.add_argument("--quiet", type=parse_duration, default=1.5,
                   help="after the answer, leave once nothing has come for this long")
    p.add_argument("--duration", type=parse_duration, default=60.0)
    p.add_argument("--model", default="gemini-3.8-live")


def main(client: type[NaiveClient], parser: argparse.ArgumentParser) -> None:
    """Run a client built on this one with the parsed options; exit with its code."""
    events = EventWriter()
    code = asyncio.run(client(parser.parse_args(), events).run())
    events.close()
    sys.exit(code)


def parser_for(doc: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def cli() -> None:
    main(NaiveClient, parser_for(__doc__))


if __name__ == "__main__":
    cli()
