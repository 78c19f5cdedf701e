"""A TURN client for the lab's TURN server (aioice's, as aiortc's ICE uses it): for each URL it
was given (FAULTLAB_TURN_URLS), an allocation with the run's credentials, then a datagram sent
through the relay to a socket of the client's own, which says where it came from. Each outcome is
an event: `client.turn_allocated` (url, relayed), `client.turn_relayed` (url, came_from) or
`client.turn_failed` (url, error), each with its round; `client.turn_round` ends a round. A round
goes over every URL once: each `--round EVENT` waits until the run's events file has that event
(`start`: at once; a step's `fault.applied` at the client's start: its rules are in force before
the first allocation, however busy the machine). Each URL gets `--wait` seconds (default 5).

    turn_client.py [--round EVENT]... [--wait SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import ssl
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aioice.turn import create_turn_endpoint


def announce(name: str, **fields: Any) -> None:
    with open(os.environ["FAULTLAB_EVENTS"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": name, "ts": time.time(), **fields}) + "\n")


class Relayed(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.got: asyncio.Future[tuple[bytes, tuple[str, int]]] = (
            asyncio.get_running_loop().create_future())

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if not self.got.done():
            self.got.set_result((data, addr))


async def seen(event: str) -> None:
    events = Path(os.environ["FAULTLAB_RUN_DIR"]) / "events.jsonl"
    while event != "start" and not (events.exists() and any(
            json.loads(line).get("event") == event
            for line in events.read_text().splitlines() if line.endswith("}"))):
        await asyncio.sleep(0.02)


async def through(url: str, peer: socket.socket, peer_got: Relayed, wait_s: float,
                  n: int) -> None:
    parts = urlsplit(url)
    host, _, port = parts.path.rpartition(":")
    transport = dict(p.split("=") for p in parts.query.split("&"))["transport"]
    context = None
    if parts.scheme == "turns":
        context = ssl.create_default_context(cafile=os.environ["FAULTLAB_TURN_CA"])
    relay, _ = await create_turn_endpoint(
        asyncio.DatagramProtocol, (host, int(port)), os.environ["FAULTLAB_TURN_USERNAME"],
        os.environ["FAULTLAB_TURN_CREDENTIAL"], ssl=context, transport=transport)
    try:
        relayed = relay.get_extra_info("sockname")
        announce("client.turn_allocated", url=url, relayed=f"{relayed[0]}:{relayed[1]}", round=n)
        relay.sendto(url.encode(), peer.getsockname())
        data, source = await asyncio.wait_for(asyncio.shield(peer_got.got), wait_s)
        assert data == url.encode(), data
        announce("client.turn_relayed", url=url, came_from=f"{source[0]}:{source[1]}", round=n)
    finally:
        relay.close()


async def main(rounds: list[str], wait_s: float) -> None:
    for n, event in enumerate(rounds):
        await seen(event)
        for url in os.environ["FAULTLAB_TURN_URLS"].split():
            await one(url, wait_s, n)
        announce("client.turn_round", round=n)


async def one(url: str, wait_s: float, n: int) -> None:
    loop = asyncio.get_running_loop()
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # The client's own address: the one its route toward the server leaves from.
    peer.connect((urlsplit(url).path.rpartition(":")[0], 9))
    own = peer.getsockname()[0]
    peer.close()
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind((own, 0))
    listener, peer_got = await loop.create_datagram_endpoint(Relayed, sock=peer)
    try:
        await asyncio.wait_for(through(url, peer, peer_got, wait_s, n), wait_s)
    except Exception as exc:  # each failure is the test's evidence
        announce("client.turn_failed", url=url, error=f"{type(exc).__name__}: {exc}", round=n)
    finally:
        listener.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--round", action="append", dest="rounds")
    parser.add_argument("--wait", type=float, default=5.0)
    args = parser.parse_args()
    asyncio.run(main(args.rounds or ["start"], args.wait))
