"""The emulator stops within a second of SIGTERM, even with connections whose sends are stuck."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from websockets.client import ClientProtocol
from websockets.uri import parse_uri

from .conftest import RunningEmulator

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = {"setup": {"model": "models/gemini-3.8-live"}}
TURN = {"clientContent": {"turns": [{"role": "user", "parts": [
    {"text": "Hello there, please say something long"}]}], "turnComplete": True}}
# websockets pauses a connection's writes above this many buffered bytes (its write_limit).
WRITE_HIGH_WATER = 32 * 1024
STUCK = 5


class StuckClient:
    """A client that sends but never reads, with a receive buffer too small for one reply."""

    def __init__(self, port: int, ca: str) -> None:
        raw = socket.socket()
        # Before connect, so the window it announces stays small (the kernel doubles it).
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect(("127.0.0.1", port))
        self.port = raw.getsockname()[1]
        self.sock = ssl.create_default_context(cafile=ca).wrap_socket(
            raw, server_hostname="localhost")
        self.ws = ClientProtocol(parse_uri(f"wss://localhost:{port}{PATH}"))
        request = self.ws.connect()
        request.headers["x-goog-api-key"] = "test-key-not-a-secret"
        self.ws.send_request(request)
        self._flush()
        while not self.ws.events_received():
            self.ws.receive_data(self.sock.recv(4096))
        self.send(SETUP)

    def send(self, message: dict[str, object]) -> None:
        self.ws.send_text(json.dumps(message).encode())
        self._flush()

    def _flush(self) -> None:
        for data in self.ws.data_to_send():
            self.sock.sendall(data)


def queues(server_port: int) -> dict[int, int]:
    """Bytes held by the kernel per client port: the server's send queue plus the client's
    receive queue, from /proc/net/tcp (loopback, IPv4)."""
    held: Counter[int] = Counter()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        local, remote = (int(cols[i].rsplit(":", 1)[1], 16) for i in (1, 2))
        tx, rx = (int(n, 16) for n in cols[4].split(":"))
        if local == server_port:
            held[remote] += tx
        elif remote == server_port:
            held[local] += rx
    return held


def sent_bytes(emulator: RunningEmulator) -> dict[int, int]:
    """Bytes per client port that the emulator's sends have accepted (its `emulator.frame`s)."""
    events = [json.loads(x) for x in emulator.events.read_text().splitlines()]
    port_of = {e["conn"]: e["client_port"] for e in events if e["event"] == "emulator.connect"}
    sent: Counter[int] = Counter()
    for e in events:
        if e["event"] == "emulator.frame" and e["from"] == "server":
            sent[port_of[e["conn"]]] += e["bytes"]
    return sent


@pytest.fixture
def clients() -> Iterator[list[StuckClient]]:
    made: list[StuckClient] = []
    yield made
    for client in made:
        client.sock.close()


def test_sigterm_ends_the_emulator_with_stuck_connections(
        start_emulator: Callable[..., RunningEmulator], clients: list[StuckClient]) -> None:
    """With 5 connections whose clients stopped reading, and whose sends therefore block, the
    emulator exits on SIGTERM by itself, having aborted them (it never exited before the fix)."""
    emulator = start_emulator("gemini-dev-2026-10", 0.02)
    port = int(emulator.env["GOOGLE_GEMINI_BASE_URL"].rsplit(":", 1)[1])
    clients += [StuckClient(port, emulator.env["SSL_CERT_FILE"]) for _ in range(STUCK)]
    # The kernel grows the server's send buffer (to MBs on loopback): ask for replies until,
    # for every connection, more than the write limit waits in the emulator itself. Sent bytes
    # are JSON, the kernel's are TLS records (larger), so the difference is a lower bound.
    deadline = time.monotonic() + 30
    while True:
        for client in clients:
            client.send(TURN)
        time.sleep(0.1)
        held, sent = queues(port), sent_bytes(emulator)
        waiting = {c.port: sent[c.port] - held[c.port] for c in clients}
        if all(n > WRITE_HIGH_WATER for n in waiting.values()):
            break
        assert time.monotonic() < deadline, f"the emulator's sends never blocked: {waiting}"

    emulator.process.send_signal(signal.SIGTERM)
    # Without the fix it never exits (wait raises); how fast is not a test's to judge.
    emulator.process.wait(timeout=10)
    assert emulator.process.returncode == 0
    events = [json.loads(x) for x in emulator.events.read_text().splitlines()]
    (aborted,) = [e for e in events if e["event"] == "emulator.aborted"]
    assert aborted["connections"] == STUCK
