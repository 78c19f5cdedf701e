"""naive: the field study's plain client: one session, a resume loop, the old call id answered.

It asks for the booking, hands each tool call to the booking backend, and answers the call (by
its id, on whatever connection is up) when the backend commits. It notices a dead path with its
own pings (every `--ping-interval`, lost after `--lost-after` unanswered) or the SDK's error,
then resumes with the last handle: first after `--first-resume`, then `--retry-after` after each
refusal, until one works or `--give-up-after` has passed. Later it asks `--ask`, logs every
answer, and leaves once the model has been quiet for `--quiet`. It never opens a new session:
when resuming fails, the user is never told.

Events: client.connected, client.tool_call, client.tool_response, client.lost (with why),
resume.attempt / resume.refused (code, latency_ms) / resume.ok (latency_ms) / resume.gave_up,
client.answer (text), and the backend's backend.job / backend.commit / backend.deduped.
Exit codes: 0 answered; 3 gave up resuming.
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

from faultlab.clients.backend import Booking, BookingBackend
from faultlab.clients.probe import kind_of
from faultlab.events import EventWriter
from faultlab.units import parse_duration


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
        self._stack: AsyncExitStack | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._answer: list[str] = []
        self._responders: set[asyncio.Task[None]] = set()
        self._last_message = time.monotonic()

    def _config(self, handle: str | None) -> Any:
        from google.genai import types

        tool = types.Tool(function_declarations=[types.FunctionDeclaration(
            name="book_slot", behavior=types.Behavior.NON_BLOCKING,
            parameters=types.Schema(type=types.Type.OBJECT,
                                    properties={"slot": types.Schema(type=types.Type.STRING)}))])
        return types.LiveConnectConfig(
            response_modalities=[types.Modality.TEXT], tools=[tool],
            session_resumption=types.SessionResumptionConfig(handle=handle))

    async def _open(self, handle: str | None) -> None:
        stack = AsyncExitStack()
        self.session = await stack.enter_async_context(
            self.client.aio.live.connect(model=self.args.model, config=self._config(handle)))
        self._stack = stack
        self.lost.clear()
        self.up.set()
        self._tasks = [asyncio.create_task(self._receive(self.session)),
                       asyncio.create_task(self._watch(self.session))]

    async def _drop(self, why: str) -> None:
        """The connection is dead (or we declared it so): forget it, without a close handshake."""
        if self.lost.is_set():
            return
        self.events.emit("client.lost", why=why)
        self.up.clear()
        self.lost.set()
        ws = getattr(self.session, "_ws", None)
        if ws is not None and ws.transport is not None:
            ws.transport.abort()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        if self._stack is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stack.aclose(), 1.0)
            self._stack = None

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

    def _on_message(self, message: Any) -> None:
        self._last_message = time.monotonic()
        update = message.session_resumption_update
        if update and update.new_handle:
            self.handle = update.new_handle
        if message.tool_call and message.tool_call.function_calls:
            for call in message.tool_call.function_calls:
                self.events.emit("client.tool_call", id=call.id, name=call.name,
                                 args=dict(call.args or {}))
                booking = self.backend.book(str(call.id), str((call.args or {}).get("slot", "")))
                task = asyncio.create_task(self._respond(str(call.id), str(call.name), booking))
                self._responders.add(task)
                task.add_done_callback(self._responders.discard)
        content = message.server_content
        if content and content.model_turn and content.model_turn.parts:
            self._answer += [p.text for p in content.model_turn.parts if p.text]
        if content and content.turn_complete and self._answer:
            self.events.emit("client.answer", text=" ".join(self._answer))
            self._answer = []
            self.answered.set()
        if kind_of(message) not in ("session_resumption_update", "usage_metadata"):
            self.events.emit("client.received", kind=kind_of(message))

    async def _respond(self, call_id: str, name: str, booking: Booking) -> None:
        from google.genai import types

        await self.backend.committed(booking)
        if not self.args.answer:
            return
        while True:
            await self.up.wait()
            try:
                await self.session.send_tool_response(function_responses=[types.FunctionResponse(
                    id=call_id, name=name,
                    response={"status": booking.status, "booking": booking.id})])
                self.events.emit("client.tool_response", id=call_id, booking=booking.id)
                return
            except Exception:
                await self._drop("send failed")

    async def _watch(self, session: Any) -> None:
        pending: list[tuple[float, Any]] = []
        while True:
            pending.append((time.monotonic(), await session._ws.ping()))
            await asyncio.sleep(self.args.ping_interval)
            answered = max((i for i, (_, f) in enumerate(pending) if f.done()), default=-1)
            del pending[: answered + 1]
            if pending and time.monotonic() - pending[0][0] > self.args.lost_after:
                await self._drop("pings unanswered")
                return

    async def _pause(self, lost_at: float) -> None:
        """Wait before the next attempt, but not past the point of giving up."""
        left = self.args.give_up_after - (time.monotonic() - lost_at)
        await asyncio.sleep(max(0.0, min(self.args.retry_after, left)))

    async def _resume(self) -> bool:
        from google.genai import errors

        lost_at = time.monotonic()
        await asyncio.sleep(self.args.first_resume)
        attempt = 0
        while time.monotonic() - lost_at < self.args.give_up_after:
            attempt += 1
            started = time.monotonic()
            self.events.emit("resume.attempt", n=attempt,
                             since_loss_s=round(started - lost_at, 3))
            try:
                await asyncio.wait_for(self._open(self.handle), self.args.connect_timeout)
            except errors.APIError as exc:
                self.events.emit("resume.refused", n=attempt, code=exc.code,
                                 latency_ms=round((time.monotonic() - started) * 1000, 1))
                await self._pause(lost_at)
                continue
            except (OSError, TimeoutError) as exc:
                self.events.emit("resume.refused", n=attempt, code=None, error=type(exc).__name__,
                                 latency_ms=round((time.monotonic() - started) * 1000, 1))
                await self._pause(lost_at)
                continue
            self.events.emit("resume.ok", n=attempt,
                             latency_ms=round((time.monotonic() - started) * 1000, 1),
                             since_loss_s=round(time.monotonic() - lost_at, 3))
            return True
        self.events.emit("resume.gave_up", attempts=attempt)
        return False

    async def run(self) -> int:
        from google.genai import types

        await self._open(None)
        self.events.emit("client.connected")
        await self.session.send_client_content(turns=types.Content(
            role="user", parts=[types.Part(text=self.args.say)]), turn_complete=True)
        asked = False
        deadline = time.monotonic() + self.args.duration
        while time.monotonic() < deadline:
            if self.lost.is_set():
                if not await self._resume():
                    return 3
                continue
            bookings = self.backend.ledger.bookings
            if (not asked and self.args.ask and bookings
                    and all(b.status == "committed" for b in bookings)):
                await asyncio.sleep(self.args.ask_after)
                if self.up.is_set():
                    self.answered.clear()
                    with contextlib.suppress(Exception):
                        await self.session.send_client_content(turns=types.Content(
                            role="user", parts=[types.Part(text=self.args.ask)]),
                            turn_complete=True)
                        asked = True
                continue
            if (asked and self.answered.is_set()
                    and time.monotonic() - self._last_message > self.args.quiet):
                # Answered, and nothing more is coming: the model may speak twice (the tool's
                # result, then the answer) when both waited behind a frozen path.
                if self._stack is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self._stack.aclose(), 2.0)
                return 0
            await asyncio.sleep(0.05)
        return 0 if self.answered.is_set() else 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the naive client (and of the clients built on it)."""
    p.add_argument("--say", default="Book me the 3pm slot tomorrow, please.")
    p.add_argument("--ask", default="Did you book it?")
    p.add_argument("--ask-after", type=parse_duration, default=1.0,
                   help="how long after the booking commits to ask")
    p.add_argument("--no-answer", dest="answer", action="store_false",
                   help="never send the tool response (field R2)")
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
