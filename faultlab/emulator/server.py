"""The emulator's I/O shell: a TLS WebSocket server around the sans-I/O core.

Paths are those of the Developer API and of Vertex (any API version, under any prefix, doubled
slashes collapsed); the key may come as a header or a query parameter. The server answers pings
and never sends one; errors are close codes only (a JSON error body crashes the SDK's parser).
Every request it refuses leaves an `EmulatorRefused`; it stops within a second, however
many of its connections are stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import (
    ConnectionClosed,
    HeaderLineTooLong,
    RequestLineTooLong,
    TooManyHeaders,
)
from websockets.frames import CloseCode
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from faultlab.cassette.tape import Closed, Message, TapeWriter
from faultlab.emulator import wsinternals
from faultlab.emulator.outbox import Action
from faultlab.emulator.refusals import close_reason
from faultlab.events import Announcement
from faultlab.protocols import DEFAULT_DIALECT
from faultlab.vocabulary.run import FrameLogged
from faultlab.vocabulary.server import (
    EmulatorAborted,
    EmulatorListening,
    EmulatorRefused,
    ServerClose,
)

if TYPE_CHECKING:
    from faultlab.emulator.apis.base import EmulatedApi
    from faultlab.emulator.personality import Personality
    from faultlab.emulator.webrtc import Calls

log = logging.getLogger(__name__)

# The largest client message, in bytes; a larger one is closed 1009 by websockets. The service's
# limit is not measured (the SDK itself only limits what it receives: websockets' 1 MiB default,
# which every server frame stays far below). 16 MiB holds a 10 MB turn or a whole 128k-token
# history in one `clientContent`; `strictjson` bounds what parsing one costs.
MAX_CLIENT_FRAME = 16 * 1024 * 1024
# Client frames websockets buffers per connection before it stops reading: with its default, 16,
# one connection could make it hold 16 x 16 MiB while the loop was busy.
MAX_QUEUED_FRAMES = 4
# How often, at most, the shell looks for sessions whose handles died (memory, not behaviour: a
# dead handle is refused at once in any case).
FORGET_EVERY_S = 1.0
# On SIGTERM, clients that answer the server's 1001 close within SHUTDOWN_S; the rest are aborted
# and their handlers get ABORT_S to end (they take milliseconds), so the process is gone well
# within a run's 2 s grace.
SHUTDOWN_S = 0.3
ABORT_S = 0.2
# websockets answers a request it cannot parse with these statuses, or with none (it closes).
UNPARSED_STATUS: dict[type[BaseException], int] = {
    RequestLineTooLong: 414, HeaderLineTooLong: 431, TooManyHeaders: 431}
NO_IDENTITY = ("Method doesn't allow unregistered callers (callers without established identity)."
               " Please use API Key or other form of API consumer identity to call this API.")
NO_IDENTITY_REASON = close_reason(NO_IDENTITY)


class Served(Protocol):
    """One connection as the shell drives it (the emulator's `Connection`, a cassette's)."""

    number: int

    @property
    def closed(self) -> bool: ...
    def begin(self, path: str, headers: Mapping[str, str], now: float) -> None: ...
    def receive(self, raw: str | bytes, now: float) -> None: ...
    def next_due(self) -> float | None: ...
    def poll(self, now: float) -> list[Action]: ...
    def peer_closed(self, now: float, timed_out: bool = False) -> None: ...


class Host(Protocol):
    """What the shell serves: the emulator (`Emulator`) or a cassette (`Replay`)."""

    api: EmulatedApi
    personality: Personality
    time_scale: float

    def announce(self, what: Announcement) -> None: ...
    def next_due(self) -> float | None: ...
    def poll(self, now: float) -> None: ...
    def connect(self, now: float, api: str = DEFAULT_DIALECT,
                client_port: int | None = None) -> Served: ...


def without_query(path: str) -> str:
    """A request's path without its query, which may carry the key."""
    return path.split("?", 1)[0]


def refusal(request: Request | None, response: Response | None,
            error: BaseException | None) -> EmulatorRefused | None:
    """The `EmulatorRefused` of a handshake that opened no WebSocket; None if it opened one, or
    if no request came at all. A reason stops at its first colon: websockets quotes the
    offending request line or header after it, and a request line may carry the key."""
    if request is None:
        if error is None or isinstance(error.__cause__, EOFError):
            return None
        if isinstance(error, wsinternals.PostRefused):  # its reason is faultlab's own
            return EmulatorRefused(str(error), status=error.status)
        return EmulatorRefused(_before_colon(str(error.__cause__ or error)),
                               status=UNPARSED_STATUS.get(type(error)))
    if response is None or response.status_code == HTTPStatus.SWITCHING_PROTOCOLS:
        return None
    return EmulatorRefused(_before_colon(str(error)) if error else response.reason_phrase,
                           path=without_query(request.path), status=response.status_code)


def _before_colon(text: str) -> str:
    return text.split(":", 1)[0]


class EmulatorServer:
    """Serves one `Emulator` (or a cassette's `Replay`) over TLS WebSockets; an async context
    manager."""

    def __init__(self, emulator: Host, ssl_context: ssl.SSLContext | None,
                 host: str = "127.0.0.1", port: int = 0, tape: TapeWriter | None = None) -> None:
        self.emulator = emulator
        # Where every connection's opening, frames and end are recorded, if anywhere.
        self.tape = tape
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self._server: Server | None = None
        self._forgetting: asyncio.Task[None] | None = None
        # Every open connection and the task that handles it: what shutdown may have to abort.
        self._handlers: dict[ServerConnection, asyncio.Task[Any]] = {}
        self._stopping = False
        # The WebRTC calls, from the first offer on (aiortc is imported then only).
        self.calls: Calls | None = None

    async def __aenter__(self) -> EmulatorServer:
        self._server = await serve(
            self._handle, self.host, self.port, ssl=self.ssl_context, ping_interval=None,
            max_size=MAX_CLIENT_FRAME, max_queue=MAX_QUEUED_FRAMES, compression=None,
            process_request=self._check_path, close_timeout=2,
            # Only for an API that has subprotocols: websockets binds a chooser to each
            # connection, a cycle that kept 3,000 Gemini connections' turns (124 MB) until the
            # collector ran (tests/emulator/test_soak.py).
            select_subprotocol=(self._choose_subprotocol
                                if self.emulator.api.protocol.subprotocols else None),
            create_connection=wsinternals.reporting(self._report_refusal),
        )
        sock = next(iter(self._server.sockets))
        self.port = sock.getsockname()[1]
        self._forgetting = asyncio.create_task(self._forget_dead_sessions())
        self.emulator.announce(EmulatorListening(self.host, self.port,
                                                 self.emulator.personality.name,
                                                 self.emulator.time_scale))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is None:
            return
        if self._forgetting is not None:
            self._forgetting.cancel()
        self._stopping = True
        self._server.close()
        if self.calls is not None:
            await self.calls.close()
        try:
            await asyncio.wait_for(self._server.wait_closed(), SHUTDOWN_S)
            return
        except TimeoutError:
            pass
        # A client behind a dropping path, or one that stopped reading, never answers the 1001.
        # websockets waits close_timeout (2 s) for it before aborting, and asyncio.run's
        # cancellation waits for that again in websockets' `async with connection`: with 1 to 20
        # such clients the emulator exited 2.1 s after SIGTERM, past the run's 2 s grace; now at
        # most SHUTDOWN_S + ABORT_S (0.5 s) after it.
        stuck = dict(self._handlers)
        if not stuck:
            return
        for ws in stuck:
            ws.transport.abort()
        self.emulator.announce(EmulatorAborted(len(stuck)))
        _, pending = await asyncio.wait(stuck.values(), timeout=ABORT_S)
        for task in pending:
            task.cancel()

    def _choose_subprotocol(self, ws: ServerConnection,
                            offered: Sequence[Subprotocol]) -> Subprotocol | None:
        """The subprotocol the API answers a client's offer with (`Protocol.subprotocol_for`)."""
        chosen = self.emulator.api.protocol.subprotocol_for(offered)
        return None if chosen is None else Subprotocol(chosen)

    def _ending(self, ws: ServerConnection, number: int, t: float) -> Closed:
        """How a connection its core did not close ended, for the tape: the client's close,
        websockets' own (a frame too big), or none (an abort, a reset, a path that died, or the
        emulator stopping, which is the recording's end rather than a behaviour)."""
        p = ws.protocol
        if self._stopping or (p.close_sent is None and p.close_rcvd is None):
            return Closed(t, number, None)
        if p.close_rcvd is not None and (p.close_sent is None or p.close_rcvd_then_sent):
            return Closed(t, number, p.close_rcvd.code, p.close_rcvd.reason, "client")
        assert p.close_sent is not None
        return Closed(t, number, p.close_sent.code, p.close_sent.reason, "server")

    async def _forget_dead_sessions(self) -> None:
        """Free the sessions whose handles died, when they die (at most FORGET_EVERY_S late)."""
        loop = asyncio.get_running_loop()
        while True:
            due = self.emulator.next_due()
            wait = FORGET_EVERY_S if due is None else min(FORGET_EVERY_S, due - loop.time())
            await asyncio.sleep(max(0.0, wait))
            try:
                self.emulator.poll(loop.time())
            except Exception:  # a bug: logged, and the sessions are looked at again next time
                log.exception("emulator bug while forgetting dead sessions")

    def _check_path(self, ws: ServerConnection,
                    request: Request) -> Response | Awaitable[Response] | None:
        """None for a WebSocket's request the API serves, a 404 for any other path; a POST on
        a WebRTC call's route (faultlab.emulator.webrtc) is answered by the calls."""
        if isinstance(request, wsinternals.Posted):
            return self._post(request)
        if self.emulator.api.protocol.dialect_of(request.path) is None:
            return ws.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _post(self, request: wsinternals.Posted) -> Response:
        from faultlab.emulator import webrtc

        if not (self.emulator.api.protocol.webrtc and webrtc.is_signalling(request.path)):
            self.emulator.announce(EmulatorRefused("Not Found", path=without_query(request.path),
                                                   status=HTTPStatus.NOT_FOUND))
            return Response(HTTPStatus.NOT_FOUND, "Not Found", Headers(
                {"Content-Length": "0", "Connection": "close"}))
        if self.calls is None:
            self.calls = webrtc.Calls(self.emulator, self.drive)
        return await self.calls.answer(request)

    def _report_refusal(self, ws: ServerConnection) -> None:
        if isinstance(ws.request, wsinternals.Posted):
            return  # the calls told their own
        refused = refusal(ws.request, ws.response, ws.protocol.handshake_exc)
        if refused is not None:
            self.emulator.announce(refused)

    async def _handle(self, ws: ServerConnection) -> None:
        # The task is websockets' for the whole connection: it still closes it after we return.
        task = asyncio.current_task()
        assert task is not None
        self._handlers[ws] = task
        task.add_done_callback(lambda _: self._handlers.pop(ws, None))
        loop = asyncio.get_running_loop()
        request = ws.request
        assert request is not None
        peer = ws.remote_address
        protocol = self.emulator.api.protocol
        dialect = protocol.dialect_of(request.path)
        assert dialect is not None  # _check_path refused the others
        conn = self.emulator.connect(loop.time(), dialect,
                                     client_port=int(peer[1]) if peer else None)
        if not protocol.authorised(request.headers, parse_qs(urlsplit(request.path).query)):
            self.emulator.announce(EmulatorRefused(NO_IDENTITY_REASON, conn=conn.number,
                                                   path=without_query(request.path), code=1008))
            conn.peer_closed(loop.time())
            await ws.close(1008, NO_IDENTITY_REASON)
            return
        tape = self.tape
        if tape is not None:
            tape.opened(loop.time(), conn.number, request.path, request.headers, ws.subprotocol)
        conn.begin(request.path, request.headers, loop.time())
        wake = asyncio.Event()

        async def read() -> None:
            try:
                async for message in ws:
                    if tape is not None:
                        tape.write(Message(loop.time(), conn.number, "client", message))
                    conn.receive(message, loop.time())
                    wake.set()
            except ConnectionClosed as exc:
                if exc.sent is not None and exc.sent.code == CloseCode.MESSAGE_TOO_BIG:
                    self.emulator.announce(ServerClose(conn.number, exc.sent.code,
                                                       exc.sent.reason, "frame too big"))
            finally:
                conn.peer_closed(loop.time(), timed_out=_timed_out(ws))
                wake.set()

        reader = asyncio.create_task(read())

        def client_closed() -> None:
            conn.peer_closed(loop.time())  # gone at the close frame, not TCP's end
            wake.set()

        assert isinstance(ws, wsinternals.Connection)
        ws.on_close_frame = client_closed
        if ws.protocol.close_rcvd is not None:  # it came before the hook was set
            loop.call_soon(client_closed)
        closed_here = False

        async def close(code: int, reason: str) -> None:
            nonlocal closed_here
            closed_here = True
            await ws.close(code, reason)

        async def send(wire: str | bytes, _: Action) -> None:
            await ws.send(wire)

        try:
            await self.drive(conn, wake, send, close)
        except ConnectionClosed:
            pass
        finally:
            conn.peer_closed(loop.time(), timed_out=_timed_out(ws))
            if tape is not None and not closed_here:
                tape.write(self._ending(ws, conn.number, loop.time()))
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                await reader

    async def drive(self, conn: Served, wake: asyncio.Event,
                    send: Callable[[str | bytes, Action], Awaitable[None]],
                    close: Callable[[int, str], Awaitable[None]], recorded: bool = True,
                    played: Sequence[str] = ()) -> None:
        """Serve `conn` until it is closed: at each wake (a client message, set by the caller)
        or when its next action falls due, what is due is sent, or closes it (one loop for the
        WebSocket and a WebRTC call's data channel). `recorded`: on the tape, if any (a
        cassette records WebSockets only); `played`: the kinds that go on a track instead (their
        frame events say `on: track`)."""
        loop = asyncio.get_running_loop()
        tape = self.tape if recorded else None
        protocol = self.emulator.api.protocol
        while not conn.closed:
            due = conn.next_due()
            if due is None or due > loop.time():
                # Woken by a client frame or at `due`, by a timer of the loop's own: a
                # wait_for timing out cancels the wait and raises twice (16 us a timed
                # wake rather than 12, measured alone), and while the model speaks a frame
                # falls due every 25 ms on each connection.
                timer = None if due is None else loop.call_at(due, wake.set)
                await wake.wait()
                if timer is not None:
                    timer.cancel()
                wake.clear()
            for action in conn.poll(loop.time()):
                if action.closes:
                    if tape is not None:
                        tape.write(Closed(loop.time(), conn.number, action.code,
                                          action.reason, "server"))
                    await close(action.code, action.reason)
                    continue
                if action.frame is not None:
                    wire: str | bytes = json.dumps(action.frame, separators=(",", ":"))
                    kind = protocol.kind_of(action.frame)
                else:
                    assert action.wire is not None
                    wire = action.wire
                    kind = str(protocol.describe(wire).get("kind", ""))
                if tape is not None:
                    tape.write(Message(loop.time(), conn.number, "server", wire))
                # Stamped as it is handed to the socket, as the tape has it: stamped after
                # the send, a loaded machine had the browser receive it "before" it was sent.
                extra: dict[str, object] = {"on": "track"} if kind in played else {}
                if action.audio_s:
                    extra["audio_s"] = round(action.audio_s, 4)
                self.emulator.announce(FrameLogged("emulator", "server", conn.number, kind,
                                                   len(wire), extra=extra))
                await send(wire, action)


def _timed_out(ws: ServerConnection) -> bool:
    """Whether the connection ended because TCP gave up retransmitting (ETIMEDOUT)."""
    exc = ws.connection_exc
    return isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT

