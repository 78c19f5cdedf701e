"""The SDK internals the reference clients reach into, each use explained, in one place (as
faultlab/proxy/internals.py is for mitmproxy's): google-genai's, and the openai SDK's (whose
realtime connection has the same `websockets` connection under another private name).

The SDK's `AsyncSession` keeps its WebSocket (a `websockets` client connection) in the private
attribute `_ws` and offers no public way to it. The clients need it for what the SDK does not do:
- ping it themselves (`ping`): the SDK sends no pings, and the field study's clients noticed a dead
  path by their own pings unanswered (`--ping-interval`, `--lost-after`);
- drop it without a close handshake (`abort`), as a client does that gives up on a dead path;
- close it with 1000 (`websocket(...).close(1000)`): the close is what unlocks the session on the
  server (field-recovery), and a parked connection is closed cleanly once it is back;
- read its TCP socket (`tcp_socket`): the uplink's mistaken keep-alive counts the bytes TCP has
  had acknowledged.
Each returns None (or does nothing) where the attribute is gone, so an SDK that renames it makes
these clients lose those abilities, not crash.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any


def websocket(session: Any) -> Any | None:
    """The session's `websockets` connection, if there is one: google-genai's `AsyncSession`
    keeps it in `_ws`, the openai SDK's realtime connection in `_connection`."""
    return getattr(session, "_ws", None) or getattr(session, "_connection", None)


async def ping(session: Any) -> asyncio.Future[Any]:
    """Send a ping on the session's WebSocket; the waiter ends when its pong comes. Raises what
    `websockets` raises on a closing connection (AttributeError without one)."""
    ws = websocket(session)
    if ws is None:
        raise AttributeError("the session has no WebSocket to ping")
    waiter: asyncio.Future[Any] = await ws.ping()
    return waiter


def abort(ws: Any) -> None:
    """Drop a connection at once: its transport aborted, no close frame, no FIN handshake."""
    if ws is not None and ws.transport is not None:
        ws.transport.abort()


def is_open(ws: Any) -> bool:
    return ws is not None and ws.state.name == "OPEN"


def close_echo(ws: Any) -> int | None:
    """The close code the peer echoed to our close frame (None: none came)."""
    echo = ws.protocol.close_rcvd
    return echo.code if echo else None


def tcp_socket(session: Any) -> socket.socket | None:
    """The session's TCP socket (IPv4 or IPv6) under its WebSocket, if it can be reached."""
    transport = getattr(websocket(session), "transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    return sock if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) else None
