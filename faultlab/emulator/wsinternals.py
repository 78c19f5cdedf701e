"""Every patch of websockets' internals the emulator makes, in one place, each explained (as
faultlab.proxy.internals does for mitmproxy's).

Two patches of the server's protocol: frames are read only after the request is answered, and a
POST is read with its body (WebRTC's signalling shares the WebSocket's port, as on the service).
websockets' `serve` builds its `ServerProtocol` itself, so the connection class `reporting` makes
swaps the protocol's class for one that does both; it also calls a report once the handshake is
over; `Connection` tells the handler when the client's close frame arrived.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.exceptions import (
    HeaderLineTooLong,
    InvalidMessage,
    RequestLineTooLong,
    TooManyHeaders,
)
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response, parse_headers, parse_line
from websockets.protocol import Event, Protocol, State
from websockets.server import ServerProtocol


class _FramesAfterTheAnswer(Protocol):
    """Frames are read once the request is answered (RFC 6455 4.1: a client waits for the
    answer before it sends any).

    websockets' server reads the bytes that follow a request as frames at once, before the
    request is answered. Bytes that are no frame (`GET / HTTP/1.1\r\n\r\njunk`, or a second
    request pipelined behind the first) failed the connection there, which ended the stream; the
    404 answered afterwards then tripped websockets' `assert not self.eof_sent`: a traceback in
    the log, and no 404 for the client. Now such bytes wait: a refusal discards them, as
    websockets does with what follows any request it refuses."""

    def parse(self) -> Generator[None, None, None]:
        while self.state is State.CONNECTING:
            yield
        yield from super().parse()


# The largest body of a POST: an SDP offer is 1-5 KB, a client secret's session a few.
MAX_BODY = 256 * 1024


class PostRefused(InvalidMessage):
    """A POST answered with `status` before any route saw it (its body too large, or not one
    faultlab reads)."""

    def __init__(self, status: HTTPStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _body_length(headers: Headers) -> int:
    """A POST's body length, from its one Content-Length (none: no body); PostRefused for a
    body sent otherwise, or too large."""
    if "Transfer-Encoding" in headers:
        raise PostRefused(HTTPStatus.NOT_IMPLEMENTED, "a body in chunks is not read")
    lengths = headers.get_all("Content-Length")
    if len(lengths) > 1 or not all(re.fullmatch(r"[0-9]{1,10}", n) for n in lengths):
        raise PostRefused(HTTPStatus.BAD_REQUEST, "Content-Length is not one number")
    length = int(lengths[0]) if lengths else 0
    if length > MAX_BODY:
        raise PostRefused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                          f"a body of {length} bytes: at most {MAX_BODY}")
    return length


@dataclass
class Posted(Request):
    """A POST and its body (websockets' `Request` refuses any body)."""

    body: bytes = b""


class _AnsweringFirst(ServerProtocol, _FramesAfterTheAnswer):
    """websockets' server protocol, reading frames only after its answer (the MRO puts
    `_FramesAfterTheAnswer.parse` where `ServerProtocol.parse` goes on to read frames), and a
    POST with its body, as a `Posted` request that `process_request` answers."""

    def parse(self) -> Generator[None, None, None]:
        if self.state is State.CONNECTING:
            while len(self.reader.buffer) < 5 and not self.reader.eof:
                yield
            if self.reader.buffer.startswith(b"POST "):
                yield from self._read_post()
                return
        yield from super().parse()

    def _read_post(self) -> Generator[None, None, None]:
        try:
            line = yield from parse_line(self.reader.read_line, RequestLineTooLong)
            method, path, version = line.decode("ascii").split(" ", 2)
            headers = yield from parse_headers(self.reader.read_line)
            length = _body_length(headers)
            body = yield from self.reader.read_exact(length)
        except PostRefused as exc:
            yield from self._refuse(exc)
            return
        except RequestLineTooLong:
            yield from self._refuse(PostRefused(HTTPStatus.REQUEST_URI_TOO_LONG,
                                                "the request line is too long"))
            return
        except (HeaderLineTooLong, TooManyHeaders):
            yield from self._refuse(PostRefused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                                                "the headers are too large"))
            return
        except Exception as exc:  # as websockets' own parser, for a request it cannot read
            self.handshake_exc = InvalidMessage("did not receive a valid HTTP request")
            self.handshake_exc.__cause__ = exc
            self.send_eof()
            self.parser = self.discard()
            next(self.parser)
            yield  # the parser is `discard` now
            return
        self.events.append(Posted(path, headers, method, version, body=bytes(body)))
        while True:  # until the answer, which discards what follows
            yield

    def _refuse(self, refused: PostRefused) -> Generator[None, None, None]:
        """Answer a POST no route will see (websockets answers a GET's faults the same way)."""
        self.handshake_exc = refused
        self.send_response(self.reject(refused.status, f"{refused}.\n"))
        yield  # the answer made `discard` the parser

    def send_response(self, response: Response) -> None:
        super().send_response(response)
        if self.state is State.OPEN:
            # Frames an eager client sent with its request are read now, as they were before.
            next(self.parser)


class Connection(ServerConnection):
    """websockets' server connection, telling its handler when the client's close frame
    arrived."""

    on_close_frame: Callable[[], None] | None = None
    """Called once the client's close frame has arrived, after every message before it was
    read. websockets ends the reading only when TCP is closed: a round trip and the client's FIN
    later, each a packet a lossy path can hold back by a retransmission timeout (a 3G path's 1 %
    loss once added 0.45 s to a session's measured end)."""

    def process_event(self, event: Event) -> None:
        super().process_event(event)
        if (isinstance(event, Frame) and event.opcode is Opcode.CLOSE
                and self.on_close_frame is not None):
            # The messages before it are in the reading task's queue, and that task's wake-up is
            # already on the loop's ready queue (it drains the queue in one step): the call
            # comes after them.
            self.loop.call_soon(self.on_close_frame)


def reporting(report: Callable[[ServerConnection], None]) -> type[Connection]:
    """The `Connection`, reading frames only after it answered the request
    (`_FramesAfterTheAnswer`), and calling `report` once its handshake is over (a refused
    request never reaches the handler; one websockets could not parse does not even reach
    `process_response`)."""

    class Reporting(Connection):
        def __init__(self, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
            # websockets' `serve` builds the protocol itself: it only gains the override.
            protocol.__class__ = _AnsweringFirst
            # Its parser started as ServerProtocol's, before any byte came: started again as
            # ours, which reads a POST.
            protocol.parser = protocol.parse()
            next(protocol.parser)
            super().__init__(protocol, *args, **kwargs)

        async def handshake(self, *args: Any, **kwargs: Any) -> None:
            await super().handshake(*args, **kwargs)
            # What `send_response` read after a 101, handled as `data_received` would have.
            for event in self.protocol.events_received():
                self.process_event(event)
            report(self)

    return Reporting
