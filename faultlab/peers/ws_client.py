"""A WebSocket client that notices a dead path the way the field study's clients did.

It sends a message every `--send-every` and its own ping every `--ping-interval`; when a ping has
gone unanswered for `--lost-after`, the connection is declared lost (`client.lost`) and closed with
a short `--close-timeout`. With `--reconnect` it then connects again until `--duration` is over.

Exit codes: 0 ran the whole duration on a healthy connection; 1 loss detected; 2 the connection
was closed or reset by the peer or the path; 3 could not connect.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from faultlab.events import EventWriter
from faultlab.units import parse_duration
from faultlab.vocabulary.session import (
    ClientClosed,
    ClientConnected,
    ClientConnectFailed,
    ClientConnecting,
    ClientDone,
    ClientLost,
    ClientMessage,
)

DONE, LOST, CLOSED, UNREACHABLE = 0, 1, 2, 3


@dataclass
class Options:
    url: str
    duration_s: float
    ping_interval_s: float
    lost_after_s: float
    close_timeout_s: float
    send_every_s: float
    connect_timeout_s: float
    reconnect: bool
    log_messages: bool = False


def _done(waiter: Awaitable[float]) -> bool:
    return isinstance(waiter, asyncio.Future) and waiter.done()


def ms_up(seconds: float) -> float:
    """`seconds` rounded up to the millisecond, so that a span past `--lost-after` still reads
    past it once written: round() made 2.0004 s unanswered read 2.0, not over a 2 s rule."""
    return math.ceil(seconds * 1000) / 1000


class Watchdog:
    """Pings that are still unanswered; a pong answers every ping sent before it."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Awaitable[float]]] = []
        self.last_rx = time.monotonic()

    def oldest_unanswered(self) -> float | None:
        answered = max((i for i, (_, f) in enumerate(self.pending) if _done(f)), default=-1)
        if answered >= 0:
            self.last_rx = max(self.last_rx, time.monotonic())
            del self.pending[: answered + 1]
        return self.pending[0][0] if self.pending else None


async def run_connection(ws: ClientConnection, opts: Options, deadline: float,
                         events: EventWriter) -> int:
    dog = Watchdog()

    async def receive() -> None:
        async for message in ws:
            dog.last_rx = time.monotonic()
            if opts.log_messages:
                text = message if isinstance(message, str) else message.hex()
                events.announce(ClientMessage(text[:120]))

    async def send() -> None:
        i = 0
        while opts.send_every_s > 0:
            await asyncio.sleep(opts.send_every_s)
            i += 1
            await ws.send(f"hello {i}")

    async def ping() -> None:
        while True:
            dog.pending.append((time.monotonic(), await ws.ping()))
            await asyncio.sleep(opts.ping_interval_s)

    tasks = [asyncio.create_task(c()) for c in (receive, send, ping)]
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                await ws.close(1000, "done")
                events.announce(ClientClosed(1000, "done", "self"))
                return DONE
            if any(t.done() for t in tasks):
                break
            oldest = dog.oldest_unanswered()
            if oldest is not None and now - oldest > opts.lost_after_s:
                events.announce(ClientLost(unanswered_s=ms_up(now - oldest),
                                           silence_s=ms_up(now - dog.last_rx)))
                await ws.close(1001, "keepalive lost")
                events.announce(ClientClosed(ws.close_code or 1006, ws.close_reason or "", "self"))
                return LOST
            await asyncio.sleep(0.02)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await ws.wait_closed()
    events.announce(ClientClosed(ws.close_code, ws.close_reason or "", "peer",
                                 ws.protocol.close_rcvd is not None))
    return CLOSED


async def main(opts: Options) -> int:
    events = EventWriter()
    deadline = time.monotonic() + opts.duration_s
    attempt, outcome, connected_once = 0, UNREACHABLE, False
    while time.monotonic() < deadline:
        attempt += 1
        events.announce(ClientConnecting(attempt, opts.url))
        started = time.monotonic()
        try:
            ws = await connect(opts.url, ping_interval=None, close_timeout=opts.close_timeout_s,
                               open_timeout=opts.connect_timeout_s)
        except (OSError, TimeoutError, ConnectionClosed) as exc:
            events.announce(ClientConnectFailed(attempt, type(exc).__name__, str(exc)[:200]))
            if not opts.reconnect:
                return outcome if connected_once else UNREACHABLE
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            continue
        connected_once = True
        local = ws.transport.get_extra_info("sockname")
        events.announce(ClientConnected(attempt, local[1] if local else None,
                                        round((time.monotonic() - started) * 1000, 1)))
        with contextlib.suppress(ConnectionClosed):
            outcome = await run_connection(ws, opts, deadline, events)
        if outcome == DONE or not opts.reconnect:
            break
    events.announce(ClientDone(outcome=["done", "lost", "closed", "unreachable"][outcome]))
    return outcome


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    default_url = f"ws://{os.environ.get('FAULTLAB_TARGET', '127.0.0.1:8765')}/"
    parser.add_argument("--url", default=default_url)
    parser.add_argument("--duration", type=parse_duration, default=10.0)
    parser.add_argument("--ping-interval", type=parse_duration, default=0.5)
    parser.add_argument("--lost-after", type=parse_duration, default=2.0)
    parser.add_argument("--close-timeout", type=parse_duration, default=0.5)
    parser.add_argument("--send-every", type=parse_duration, default=0.2)
    parser.add_argument("--connect-timeout", type=parse_duration, default=1.0)
    parser.add_argument("--reconnect", action="store_true")
    parser.add_argument("--log-messages", action="store_true",
                        help="write a client.message event for every message received")
    a = parser.parse_args()
    opts = Options(a.url, a.duration, a.ping_interval, a.lost_after, a.close_timeout,
                   a.send_every, a.connect_timeout, a.reconnect, a.log_messages)
    sys.exit(asyncio.run(main(opts)))


if __name__ == "__main__":
    cli()
