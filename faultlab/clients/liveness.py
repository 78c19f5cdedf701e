"""How the reference clients tell a live connection from a dead one, with their own pings.

One ping every `--ping-interval`; the connection is lost when nothing (a frame or a pong) came for
`--lost-after`, checked every 50 ms so that detection takes 1.5-2.0 s as in the field. A lost
connection may be parked instead of dropped (`--close-old-after`, `--close-old-on-return`) and
closed cleanly (1000) later, which unlocks its session on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from faultlab.clients import sdk
from faultlab.events import EventWriter
from faultlab.vocabulary.session import ClientOldBack, ClientOldClose, ClientOldClosed

WATCH_TICK_S = 0.05


def answered(pong_waiter: asyncio.Future[Any]) -> bool:
    """Whether a ping's waiter ended with its pong (not cancelled or failed by a close)."""
    return not pong_waiter.cancelled() and pong_waiter.exception() is None


class Liveness:
    """The signs of life of the connection in use: any frame, or a pong to one of our pings."""

    def __init__(self, ping_interval_s: float, lost_after_s: float) -> None:
        self.ping_interval_s = ping_interval_s
        self.lost_after_s = lost_after_s
        self.last_alive = time.monotonic()

    def alive(self) -> None:
        self.last_alive = time.monotonic()

    async def watch(self, session: Any, current: Callable[[], Any],
                    lost: Callable[[str], Awaitable[None]],
                    suspect: Callable[[float], None]) -> None:
        """Ping `session` every interval and call `lost` once it has been quiet too long;
        `suspect(quiet_s)` hears how long it has been quiet at every look. A pong counts only
        while `session` is still the `current()` one (not one given up on)."""
        def pong(waiter: asyncio.Future[Any]) -> None:
            if session is current() and answered(waiter):
                self.alive()

        pinged = 0.0
        while True:
            now = time.monotonic()
            if now - pinged >= self.ping_interval_s:
                try:
                    waiter = await sdk.ping(session)
                except Exception:
                    return  # the connection is closing: the receiver reports it
                waiter.add_done_callback(pong)
                pinged = now
            quiet = now - self.last_alive
            if quiet > self.lost_after_s:
                await lost("pings unanswered")
                return
            suspect(quiet)
            await asyncio.sleep(WATCH_TICK_S)


async def close_parked(ws: Any, stack: AsyncExitStack, close_after_s: float | None,
                       ping_interval_s: float, timeout_s: float, events: EventWriter) -> None:
    """Close a parked connection (1000) `close_after_s` after the loss was noticed, or (None)
    once it shows life again (a pong)."""
    lost_at = time.monotonic()
    if close_after_s is not None:
        await asyncio.sleep(close_after_s)
    else:
        back = asyncio.Event()

        def pong(waiter: asyncio.Future[Any]) -> None:
            if answered(waiter):
                back.set()

        while not back.is_set():
            with contextlib.suppress(Exception):
                (await ws.ping()).add_done_callback(pong)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(back.wait(), ping_interval_s)
        events.announce(ClientOldBack(round(time.monotonic() - lost_at, 3)))
    started = time.monotonic()
    events.announce(ClientOldClose(1000))
    with contextlib.suppress(Exception):
        await asyncio.wait_for(ws.close(1000), timeout_s)
    events.announce(ClientOldClosed(sdk.close_echo(ws),
                                    round((time.monotonic() - started) * 1000, 1)))
