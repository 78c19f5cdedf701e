"""Every patch of websockets' internals the emulator makes, in one place, each explained (as
faultlab.proxy.internals does for mitmproxy's).

One patch: frames are read only after the request is answered. websockets' `serve` builds its
`ServerProtocol` itself, so the connection class `reporting` makes swaps the protocol's class for
one whose parser waits; it also calls a report once the handshake is over.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Response
from websockets.protocol import Protocol, State
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


class _AnsweringFirst(ServerProtocol, _FramesAfterTheAnswer):
    """websockets' server protocol, reading frames only after its answer (the MRO puts
    `_FramesAfterTheAnswer.parse` where `ServerProtocol.parse` goes on to read frames)."""

    def send_response(self, response: Response) -> None:
        super().send_response(response)
        if self.state is State.OPEN:
            # Frames an eager client sent with its request are read now, as they were before.
            next(self.parser)


def reporting(report: Callable[[ServerConnection], None]) -> type[ServerConnection]:
    """websockets' connection, reading frames only after it answered the request
    (`_FramesAfterTheAnswer`), and calling `report` once its handshake is over (a refused
    request never reaches the handler; one websockets could not parse does not even reach
    `process_response`)."""

    class Reporting(ServerConnection):
        def __init__(self, protocol: ServerProtocol, *args: Any, **kwargs: Any) -> None:
            # websockets' `serve` builds the protocol itself: it only gains the override.
            protocol.__class__ = _AnsweringFirst
            super().__init__(protocol, *args, **kwargs)

        async def handshake(self, *args: Any, **kwargs: Any) -> None:
            await super().handshake(*args, **kwargs)
            # What `send_response` read after a 101, handled as `data_received` would have.
            for event in self.protocol.events_received():
                self.process_event(event)
            report(self)

    return Reporting
