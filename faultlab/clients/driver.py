"""The reference clients' conversation loop, written once over a `Transport` (its realtime API).

naive, field-recovery and racing-recovery run it on google-genai's Live API (naive.py),
openai-naive and openai-recovery on the openai SDK's Realtime client (realtime.py). The loop asks
for the booking (typed, or the uplink's microphone), hands each tool call to the conversation
(faultlab/scenarios/booking/conversation.py), watches the connection (its own pings, or the SDK's
error), and on a loss lets its `Recovery` do what the client's command line picked; once the user
has the answer and the model is quiet, it leaves. Every event the clients write is written here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

from faultlab.clients import sdk
from faultlab.clients.liveness import Liveness, close_parked
from faultlab.clients.uplink import Uplink
from faultlab.events import EventWriter
from faultlab.scenarios.booking.conversation import BookingConversation, Turn
from faultlab.scenarios.booking.script import ANSWERED, REFUSED, UNANSWERED
from faultlab.vocabulary.session import (
    Answer,
    AudioEnd,
    AudioStart,
    ClientConnected,
    ClientError,
    ClientLost,
    ClientReceived,
    ClientRecovered,
    ClientRefused,
    RecoveryAttempt,
    RecoveryFailed,
    RecoveryNewSession,
    RecoveryRestored,
    ResumeAttempt,
    ResumeGaveUp,
    ResumeOk,
    ResumeRefused,
    ToolCall,
)

# A set-up connection: the stack that closes it (None where closing the socket is all there is),
# and the SDK's session on it.
Connection = tuple[AsyncExitStack | None, Any]


class Refused(Exception):
    """The service would not open (or resume) a session: its code (a close code, an API error's
    code, an in-band error's) and its reason."""

    def __init__(self, code: str | int | None, reason: str) -> None:
        super().__init__(reason)
        self.code = code


@dataclass
class Heard:
    """What a server message says, in the loop's words (a transport reads its API's message)."""

    kind: str  # as faultlab names it (client.received)
    quiet: bool = False  # bookkeeping no run looks at: no client.received
    output: bool = False  # the model said or did something (ends a loss: client.recovered)
    handle: str | None = None  # a new resumption handle
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # id, name, args
    text: list[str] = field(default_factory=list)  # pieces of the answer
    audio: bool = False  # spoken audio came
    audio_s: float = 0.0  # how much
    speaking: bool | None = None  # a model turn is under way now (True), over (False)
    turn_end: bool = False  # the model's turn (or response) is over
    cancelled: bool = False  # cut short: what it had said is no answer
    error: tuple[str | int | None, str] | None = None  # an in-band error: code, message


class Transport(Protocol):
    """One realtime API, as the loop uses it."""

    # Whether a session outlives its connection (resumed with a handle): where it does not, what
    # a lost response had said is no answer, and a loss after the answer needs no recovery.
    resumable: bool
    joiner: str  # between the answer's pieces
    idle: asyncio.Event  # no model turn (response) under way

    async def connect(self, handle: str | None) -> Connection:
        """A connection set up (resuming `handle` where the API can), not yet in use; Refused
        when the service says no, OSError/TimeoutError when there is no WebSocket at all."""
        ...

    def messages(self, session: Any) -> AsyncIterator[Heard]:
        """The session's messages until its connection ends (raises what ended it)."""
        ...

    def why_lost(self, error: Exception) -> str:
        """client.lost's `why` for what ended the receiving."""
        ...

    async def say(self, session: Any, turns: list[Turn], turn_complete: bool) -> None: ...

    async def answer_call(self, session: Any, call_id: str, name: str,
                          response: dict[str, Any]) -> None: ...

    async def send_audio(self, session: Any, pcm: bytes) -> None:
        """16 kHz 16-bit mono PCM, in the API's format."""

    async def end_audio(self, session: Any) -> None: ...

    async def close(self, connection: Connection) -> None:
        """Leave cleanly (the close handshake)."""


class Recovery(ABC):
    """What a client does about a lost connection (its command line picks one); but for
    `recover`, each step does nothing unless a recovery says otherwise."""

    # Whether a new session hears the backend's status lines (only a recovery that opens one).
    status_notes: bool = False

    def suspect(self, client: ReferenceClient, quiet_s: float) -> None:  # noqa: B027
        """Hears, while the connection is watched, how long it has been quiet."""

    async def before_drop(self, client: ReferenceClient) -> None:  # noqa: B027
        """Runs once a loss is noticed, before the connection is let go."""

    @abstractmethod
    async def recover(self, client: ReferenceClient) -> bool:
        """After a loss: a connection installed (True), or given up (False)."""

    async def leave(self, client: ReferenceClient) -> None:  # noqa: B027
        """Runs as the client leaves."""


def since(start: float) -> float:
    return round(time.monotonic() - start, 3)


def latency_ms(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 1)


class ReferenceClient:
    """The booking conversation on one connection at a time of `transport`'s API."""

    def __init__(self, args: argparse.Namespace, events: EventWriter, transport: Transport,
                 recovery: Recovery) -> None:
        self.args = args
        self.events = events
        self.transport = transport
        self.recovery = recovery
        self.conversation = BookingConversation(self, args, events, recovery.status_notes)
        self.liveness = Liveness(args.ping_interval, args.lost_after)
        self.handle: str | None = None
        self.session: Any = None
        self.up = asyncio.Event()
        self.lost = asyncio.Event()
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

    @property
    def speaking(self) -> bool:
        """A model turn is under way (output came, or a response was asked for, not over yet)."""
        return not self.transport.idle.is_set()

    # Connections.

    async def connect(self, handle: str | None) -> Connection:
        return await self.transport.connect(handle)

    def install(self, stack: AsyncExitStack | None, session: Any) -> None:
        """Make a set-up connection the one in use: receive on it, watch it, answer on it."""
        self.session = session
        self._stack = stack
        self.liveness.alive()
        self.transport.idle.set()
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
        self.events.announce(ClientLost(why))
        self._lost_at = time.monotonic()
        if not self.transport.resumable:  # a new session answers anew
            self._answer, self._audio_s = [], 0.0
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
        try:
            async for heard in self.transport.messages(session):
                self._on_heard(heard)
            await self.drop("closed")
        except Exception as exc:  # the socket died under the SDK, or the service said why
            await self.drop(self.transport.why_lost(exc))

    # Messages.

    def _on_heard(self, heard: Heard) -> None:
        now = time.monotonic()
        self._last_message = now
        self.liveness.alive()
        if heard.handle:
            self.handle = heard.handle
        if heard.speaking is True:
            self.transport.idle.clear()
        if heard.output and self._lost_at is not None:
            self.events.announce(ClientRecovered(round(now - self._lost_at, 3), heard.kind))
            self._lost_at = None
        for call_id, name, args in heard.calls:
            self.events.announce(ToolCall(call_id, name, args))
            self.conversation.on_call(str(call_id), str(name), args)
        self._answer.extend(heard.text)
        if heard.audio:
            if self._audio_s == 0.0:
                self.events.announce(AudioStart())
            self._audio_s += heard.audio_s
        if heard.speaking is False:
            self.transport.idle.set()
        if heard.turn_end:
            self._turn_end(heard.cancelled)
        if heard.error is not None:
            code, message = heard.error
            self.events.announce(ClientError(code=code, message=message[:200]))
        if not heard.quiet:
            self.events.announce(ClientReceived(heard.kind))

    def _turn_end(self, cancelled: bool) -> None:
        if self._audio_s:
            self.events.announce(AudioEnd(round(self._audio_s, 3)))
            self._audio_s = 0.0
        if cancelled:
            self._answer = []
        if self._answer:
            self.events.announce(Answer(self.transport.joiner.join(self._answer)))
            self._answer = []
            self.conversation.on_reply()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._responders.add(task)
        task.add_done_callback(self._responders.discard)

    # Sending, on the connection in use (each raises when it cannot take it).

    async def say(self, turns: list[Turn], turn_complete: bool) -> None:
        await self.transport.say(self.session, turns, turn_complete)

    async def answer_call(self, call_id: str, name: str, response: dict[str, Any]) -> None:
        await self.transport.answer_call(self.session, call_id, name, response)

    async def send_audio(self, pcm: bytes) -> None:
        await self.transport.send_audio(self.session, pcm)

    async def end_audio(self) -> None:
        await self.transport.end_audio(self.session)

    # Recovering.

    async def _pause(self, lost_at: float, window_s: float) -> None:
        """Wait before the next attempt, but not past the end of the window."""
        left = window_s - (time.monotonic() - lost_at)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._retry_now.wait(), max(0.0, min(self.args.retry_after, left)))
        self._retry_now.clear()

    async def resume_attempts(self, lost_at: float, window_s: float) -> Connection | None:
        """Resume attempts with the last handle until one is set up (returned, not installed) or
        `window_s` since the loss has passed (None)."""
        await asyncio.sleep(self.args.first_resume)
        attempt = 0
        while time.monotonic() - lost_at < window_s:
            attempt += 1
            started = time.monotonic()
            self.events.announce(ResumeAttempt(attempt, since(lost_at)))
            try:
                connection = await asyncio.wait_for(self.connect(self.handle),
                                                    self.args.connect_timeout)
            except Refused as exc:
                self.events.announce(ResumeRefused(attempt, exc.code,
                                                   latency_ms=latency_ms(started)))
                await self._pause(lost_at, window_s)
                continue
            except (OSError, TimeoutError) as exc:
                self.events.announce(ResumeRefused(attempt, None, type(exc).__name__,
                                                   latency_ms(started)))
                await self._pause(lost_at, window_s)
                continue
            self.events.announce(ResumeOk(attempt, latency_ms(started), since(lost_at)))
            return connection
        self.events.announce(ResumeGaveUp(attempt))
        return None

    async def new_sessions(self, lost_at: float) -> Connection | None:
        """New sessions tried every `--retry-after` until one is set up (returned, not
        installed) or `--give-up-after` since the loss has passed (None)."""
        attempt = 0
        while time.monotonic() - lost_at < self.args.give_up_after:
            attempt += 1
            self.events.announce(RecoveryAttempt(attempt, since(lost_at)))
            try:
                return await self.connect(None)
            except (Refused, OSError, TimeoutError) as exc:
                self.events.announce(RecoveryFailed(
                    attempt, error=f"{type(exc).__name__}: {str(exc)[:80]}"))
                await asyncio.sleep(self.args.retry_after)
        return None

    async def restore(self, connection: Connection, lost_at: float) -> None:
        """Make a new session the one in use and tell it what the user asked and what the
        backend has done; ask the question with it when its answer is known."""
        self.generation += 1
        self.install(*connection)
        self.events.announce(RecoveryNewSession(since(lost_at)))
        turns, ask, lines, reply = self.conversation.restore()
        await self.say(turns, turn_complete=reply)
        if ask:
            self.conversation.mark_asked()
        self.events.announce(RecoveryRestored(lines, ask))

    # The run.

    async def _leave(self) -> None:
        await self.recovery.leave(self)
        self.leaving = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.transport.close((self._stack, self.session)), 2.0)

    async def _open(self) -> int | None:
        """The first connection installed (None), or client.refused and its exit code."""
        try:
            self.install(*await self.connect(None))
        except Refused as exc:
            self.events.announce(ClientRefused(exc.code, str(exc)[:200]))
            return REFUSED
        except OSError as exc:  # unreachable, reset, TLS refused, timed out: no WebSocket at all
            self.events.announce(ClientRefused(None, f"{type(exc).__name__}: {exc}"))
            return REFUSED
        return None

    async def run(self) -> int:
        talk = self.conversation
        refused = await self._open()
        if refused is not None:
            return refused
        self.events.announce(ClientConnected())
        if self.args.mic:
            self.uplink = Uplink(self, self.args.keep_alive, self.args.stream_end, self.events)
            self.spawn(self.uplink.run())
        else:
            await self.say(talk.opening(), turn_complete=True)
        deadline = time.monotonic() + self.args.duration
        try:
            while time.monotonic() < deadline:
                if self.lost.is_set():
                    if talk.done() and not self.transport.resumable:
                        return ANSWERED  # the user has the answer, and the session is gone
                    if not await self.recovery.recover(self):
                        return UNANSWERED
                    continue
                if talk.ask_due(self.speaking):
                    await talk.ask(lambda: self.speaking)
                    continue
                if talk.done() and time.monotonic() - self._last_message > self.args.quiet:
                    # Answered, and nothing more is coming: the model may speak twice (the tool's
                    # result, then the answer) when both waited behind a frozen path.
                    await self._leave()
                    return ANSWERED
                await asyncio.sleep(0.05)
            return ANSWERED if talk.done() else UNANSWERED
        finally:
            for task in list(self._responders):
                task.cancel()
            talk.close()
