"""Every request the emulator refuses leaves an `emulator.refused` event, without the key."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidMessage, RequestLineTooLong
from websockets.frames import Close, Frame, Opcode
from websockets.http11 import Response
from websockets.sync.client import connect
from websockets.uri import parse_uri

from faultlab.emulator.server import refusal

from .conftest import RunningEmulator

KEY = "AIzaSy-not-a-real-key-but-must-not-leak"
DEV = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
Start = Callable[..., RunningEmulator]


def port_of(emulator: RunningEmulator) -> int:
    """The emulator's port, from its base URL (Gemini's, or OpenAI's, which ends in /v1)."""
    url = emulator.env.get("GOOGLE_GEMINI_BASE_URL") or emulator.env["OPENAI_BASE_URL"]
    port = urlsplit(url).port
    assert port is not None, url
    return port


def exchange(emulator: RunningEmulator, request: str | bytes) -> bytes:
    """Send a raw HTTP request (and what follows it) over TLS to the emulator; what it answers
    before it closes."""
    context = ssl.create_default_context(cafile=emulator.env["SSL_CERT_FILE"])
    with socket.create_connection(("127.0.0.1", port_of(emulator)), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as sock:
        sock.sendall(request.encode() if isinstance(request, str) else request)
        answer = b""
        try:
            while chunk := sock.recv(4096):
                answer += chunk
        except (ConnectionResetError, ssl.SSLError):
            pass  # websockets aborts the connection right after a refusal
        return answer


def refused(emulator: RunningEmulator) -> list[dict[str, Any]]:
    """The emulator's `emulator.refused` events, once there is one."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        events = [json.loads(x) for x in emulator.events.read_text().splitlines()]
        found = [e for e in events if e["event"] == "emulator.refused"]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("no emulator.refused event")


WS_HEADERS = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"


@pytest.mark.parametrize(("request_text", "status", "fields"), [
    pytest.param(f"GET /v1beta/models?key={KEY} HTTP/1.1\r\nHost: localhost\r\n\r\n", 404,
                 {"path": "/v1beta/models", "status": 404, "reason": "Not Found"},
                 id="unserved-path"),
    pytest.param(f"GET {DEV}?key={KEY} HTTP/1.1\r\nHost: localhost\r\n\r\n", 426,
                 {"path": DEV, "status": 426, "reason": "missing Connection header"},
                 id="not-websocket"),
    pytest.param(f"GET {DEV}?key={KEY} HTTP/1.1\r\nHost: localhost\r\n{WS_HEADERS}\r\n", 400,
                 {"path": DEV, "status": 400, "reason": "missing Sec-WebSocket-Key header"},
                 id="bad-handshake"),
    pytest.param(f"POST {DEV}?key={KEY} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
                 "\r\n{}", 404, {"path": DEV, "status": 404, "reason": "Not Found"},
                 id="post-with-body"),
])
def test_a_refused_http_request_leaves_an_event(
        start_emulator: Start, request_text: str, status: int | None,
        fields: dict[str, Any]) -> None:
    """An unserved path (404, a POST's too: only WebRTC's routes take one), a request that is no
    WebSocket handshake (426, 400) each leave one event, its path without the key."""
    emulator = start_emulator()
    answer = exchange(emulator, request_text)
    if status is None:
        assert answer == b""
    else:
        assert answer.startswith(f"HTTP/1.1 {status} ".encode())
    (event,) = refused(emulator)
    assert {k: event.get(k) for k in fields} == fields
    assert KEY not in emulator.events.read_text()


@pytest.mark.parametrize("after", [
    pytest.param("junk", id="bytes-after-the-request"),
    pytest.param("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", id="pipelined-request"),
])
def test_bytes_after_a_refused_request_do_not_cost_its_answer(start_emulator: Start,
                                                               after: str) -> None:
    """A request followed in the same write by more bytes (junk, a second request) still gets its
    404, and websockets logs no traceback (it read those bytes as frames before answering)."""
    emulator = start_emulator()
    answer = exchange(emulator, f"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n{after}")
    assert answer.startswith(b"HTTP/1.1 404 ")
    (event,) = refused(emulator)
    assert event["status"] == 404
    assert "Traceback" not in emulator.log.read_text()


def test_a_frame_sent_with_the_handshake_is_still_read(start_emulator: Start) -> None:
    """A client that sends its setup in the same write as its handshake (RFC 6455 says to wait) is
    answered as before the fix above: the frame is read once the 101 is out."""
    emulator = start_emulator()
    client = ClientProtocol(parse_uri(f"wss://localhost:{port_of(emulator)}{DEV}?key={KEY}"))
    client.send_request(client.connect())
    setup = json.dumps({"setup": {"model": "models/not-served"}}).encode()
    eager = b"".join(client.data_to_send()) + Frame(Opcode.TEXT, setup).serialize(
        mask=True, extensions=[])
    client.receive_data(exchange(emulator, eager))
    response, *frames = client.events_received()
    assert isinstance(response, Response) and response.status_code == 101
    (close,) = [f for f in frames if isinstance(f, Frame) and f.opcode is Opcode.CLOSE]
    assert Close.parse(close.data).code == 1008  # the model is not served: the setup was read


def test_a_websocket_without_identity_is_closed_1008_with_an_event(start_emulator: Start) -> None:
    """A WebSocket without a key or token is closed 1008, and the event names that close."""
    emulator = start_emulator()
    context = ssl.create_default_context(cafile=emulator.env["SSL_CERT_FILE"])
    with connect(f"wss://localhost:{port_of(emulator)}{DEV}", ssl=context) as ws, \
            pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    (event,) = refused(emulator)
    assert event["code"] == 1008 and event["path"] == DEV
    assert "identity" in event["reason"]


def test_a_request_it_cannot_parse_is_reported_without_the_line() -> None:
    """websockets quotes a bad request line after a colon; the event keeps only what precedes it."""
    bad = InvalidMessage("did not receive a valid HTTP request")
    bad.__cause__ = ValueError(f"invalid HTTP request line: GET {DEV}?key={KEY} HTTP/2")
    refused = refusal(None, None, bad)
    assert refused is not None
    assert refused.fields() == {"status": None, "reason": "invalid HTTP request line"}
    too_long = refusal(None, None, RequestLineTooLong("line too long"))
    assert too_long is not None and too_long.fields() == {"status": 414, "reason": "line too long"}
    closed = InvalidMessage("did not receive a valid HTTP request")
    closed.__cause__ = EOFError("connection closed while reading HTTP request line")
    assert refusal(None, None, closed) is None
