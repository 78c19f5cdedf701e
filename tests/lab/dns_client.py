"""A client that reconnects by name, for the dns fault's lab test.

    dns_client.py URL DURATION_S [NAME...]

It opens one WebSocket to URL (ws:// or wss://, trusting SSL_CERT_FILE) and keeps it; looks each
NAME up once; then,
every 200 ms until DURATION_S, it looks the URL's host up (getaddrinfo, as any client's connect
does) and opens and closes a TCP connection to what it found: a reconnect. Events: `lookup`
(host, ok, error: the EAI_* name, ms, started: the wall time it began), and at the end `existing`
(the first WebSocket, its ticks read all along, still answers a ping).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect

from faultlab.events import EventWriter

EAI = {getattr(socket, n): n for n in dir(socket) if n.startswith("EAI_")}


async def look_up(name: str, port: int, events: EventWriter) -> str | None:
    """`name`'s first IPv4 address, or None when the lookup failed; either way a `lookup`."""
    started = time.time()
    clock = time.monotonic()
    try:
        found = await asyncio.to_thread(socket.getaddrinfo, name, port, socket.AF_INET,
                                        socket.SOCK_STREAM)
    except socket.gaierror as exc:
        events.emit("lookup", host=name, ok=False, error=EAI.get(exc.errno, str(exc.errno)),
                    ms=round((time.monotonic() - clock) * 1000, 1), started=started)
        return None
    address = str(found[0][4][0])
    events.emit("lookup", host=name, ok=True, address=address,
                ms=round((time.monotonic() - clock) * 1000, 1), started=started)
    return address


async def reconnect(name: str, port: int, events: EventWriter) -> None:
    if (address := await look_up(name, port, events)) is not None:
        _, writer = await asyncio.open_connection(address, port)
        writer.close()


async def drain(ws: ClientConnection) -> None:
    async for _ in ws:
        pass


async def main(url: str, duration_s: float, names: list[str]) -> int:
    events = EventWriter()
    parts = urlsplit(url)
    name, port = str(parts.hostname), parts.port or 443
    async with connect(url) as ws:
        events.emit("client.connected", attempt=1)
        # The server's ticks are read as they come: a full receive queue would stop the reading
        # of the pong too.
        reader = asyncio.create_task(drain(ws))
        for other in names:
            await look_up(other, port, events)
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline:
            await reconnect(name, port, events)
            await asyncio.sleep(0.2)
        pong = await ws.ping()
        await asyncio.wait_for(pong, 2.0)
        events.emit("existing", ok=True)
        reader.cancel()
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], float(sys.argv[2]), sys.argv[3:])))
