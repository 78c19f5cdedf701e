"""A WebSocket echo/tick server: echoes every message and sends a tick every `--tick`.

It never pings (like the Live API), speaks wss:// with `--tls-cert` and `--tls-key` (PEM files),
and writes its events (`server.connected`, `server.closed`
with the close code it received, 1006 when none came) to `FAULTLAB_EVENTS`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import ssl
import time

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from faultlab.events import EventWriter
from faultlab.units import parse_duration
from faultlab.vocabulary.server import EchoClosed, EchoConnected, EchoListening, EchoStopped


class EchoTickServer:
    def __init__(self, tick_s: float, events: EventWriter) -> None:
        self.tick_s = tick_s
        self.events = events
        self.connections = 0

    async def handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        n = self.connections
        peer = ws.remote_address
        self.events.announce(EchoConnected(n, f"{peer[0]}:{peer[1]}"))
        ticker = asyncio.create_task(self._tick(ws)) if self.tick_s > 0 else None
        echoed = 0
        try:
            async for message in ws:
                await ws.send(message)
                echoed += 1
        except ConnectionClosed:
            pass
        finally:
            if ticker is not None:
                ticker.cancel()
            self.events.announce(EchoClosed(
                n, ws.close_code, ws.close_reason or "",
                received_close=ws.protocol.close_rcvd is not None, echoed=echoed))

    async def _tick(self, ws: ServerConnection) -> None:
        i = 0
        with contextlib.suppress(ConnectionClosed):
            while True:
                await asyncio.sleep(self.tick_s)
                i += 1
                await ws.send(json.dumps({"tick": i, "ts": time.time()}))


async def main(args: argparse.Namespace) -> None:
    events = EventWriter()
    server = EchoTickServer(args.tick, events)
    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set_result, None)
    tls = None
    if args.tls_cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    async with serve(server.handle, args.host, args.port, ping_interval=None, close_timeout=1,
                     ssl=tls):
        events.announce(EchoListening(args.host, args.port))
        await stop
    events.announce(EchoStopped(server.connections))


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=int(os.environ.get("FAULTLAB_TARGET_PORT", 8765)))
    parser.add_argument("--tick", type=parse_duration, default=0.2,
                        help="interval between ticks, e.g. 200ms (0s: no ticks)")
    parser.add_argument("--tls-cert", help="serve wss:// with this certificate (PEM)")
    parser.add_argument("--tls-key", help="the certificate's key (PEM)")
    args = parser.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    asyncio.run(main(args))


if __name__ == "__main__":
    cli()
