from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from faultlab.capture.flows import analyse
from faultlab.capture.pcap import ACK, FIN, RST, SYN
from faultlab.capture.synthetic import CLIENT_CLOSE, SessionPlan, record, texts
from faultlab.capture.tshark import TSHARK_HINT
from faultlab.cassette.pcap import TapeSourceError, tape_from_pcap
from faultlab.cassette.tape import Closed, Message, Opened, Record

from .test_pcap import behind_a_hole, write_capture, ws_frame
from .test_pcap_server import Session
from .test_pcap_tls import fake_tls, needs_tshark

REQUEST = (b"GET /ws/live?model=m HTTP/1.1\r\nHost: example.test\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Protocol: chat, superchat\r\n"
           b"User-Agent: test-client/1.0\r\n\r\n")
RESPONSE = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Protocol: chat\r\n\r\n")
REAPING = struct.pack("!H", 1011) + b"Internal error encountered."


def opened(s: Session, t: float, request: bytes = REQUEST, response: bytes = RESPONSE) -> Session:
    """The TCP handshake at `t`, the Upgrade 3 ms later and its answer 1 ms after that."""
    s.up(t, SYN)
    s.down(t + 0.001, SYN | ACK)
    s.up(t + 0.002, ACK)
    s.up(t + 0.003, data=request)
    s.down(t + 0.004, data=response)
    return s


def rounded(records: list[Record]) -> list[Record]:
    """The records with their times to the microsecond a pcap keeps."""
    return [replace(r, t=round(r.t, 6)) for r in records]


def test_a_ws_conversation_becomes_its_tape(tmp_path: Path) -> None:
    """The opening's path, headers and chosen subprotocol, every message each way (unmasked,
    fragments joined, one split over two segments), and the first close with its sender."""
    s = opened(Session(), 100.0)
    s.up(100.1, data=ws_frame(1, b'{"setup": {}}', masked=True))
    s.down(100.2, data=ws_frame(1, b'{"setupComplete": {}}', masked=False))
    s.up(100.3, data=bytes([0x01]) + ws_frame(1, b"hel", masked=True)[1:])  # text, not final
    s.up(100.305, data=ws_frame(9, b"", masked=True))  # a ping between the fragments
    s.up(100.31, data=ws_frame(0, b"lo", masked=True))
    s.down(100.4, data=ws_frame(2, b"\x00\x01\xff", masked=False))
    split = ws_frame(1, "déjà vu".encode(), masked=False)
    s.down(100.5, data=split[:5])
    s.down(100.51, data=split[5:])
    s.down(101.0, data=ws_frame(8, REAPING, masked=False))
    s.up(101.01, data=ws_frame(8, REAPING, masked=True))
    s.up(101.02, FIN | ACK)
    records = tape_from_pcap(s.write(tmp_path / "ws.pcap"))
    assert rounded(records) == [
        Opened(100.004, 1, "/ws/live?model=m", "chat", {
            "Host": "example.test", "Upgrade": "websocket", "Connection": "Upgrade",
            "Sec-WebSocket-Protocol": "chat, superchat", "User-Agent": "test-client/1.0"}),
        Message(100.1, 1, "client", '{"setup": {}}'),
        Message(100.2, 1, "server", '{"setupComplete": {}}'),
        Message(100.31, 1, "client", "hello"),
        Message(100.4, 1, "server", b"\x00\x01\xff"),
        Message(100.51, 1, "server", "déjà vu"),
        Closed(101.0, 1, 1011, "Internal error encountered.", "server"),
    ]


def test_connections_are_numbered_as_they_opened_and_closed_as_they_ended(tmp_path: Path) -> None:
    """Connections count from 1 in the order of their 101s, not of their SYNs; one reset without
    a close frame closes when its reset came, one still open when the capture ends closes then,
    both with no code and no sender; a flow that never upgraded is no connection."""
    late, early, plain = Session(port=40001), Session(port=40002), Session(port=40003)
    late.up(200.0, SYN)  # the first SYN, but its Upgrade is answered last
    late.down(200.001, SYN | ACK)
    late.up(200.002, ACK)
    opened(early, 200.1)
    late.up(200.5, data=REQUEST)
    late.down(200.6, data=RESPONSE)
    early.up(201.0, data=ws_frame(1, b"one", masked=True))
    late.up(202.0, data=ws_frame(1, b"two", masked=True))
    early.down(203.0, RST)
    late.down(204.0, ACK)
    opened(plain, 204.5, b"GET /page HTTP/1.1\r\nHost: example.test\r\n\r\n",
           b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    capture = Session()
    capture.packets = sorted(late.packets + early.packets + plain.packets, key=lambda p: p[0])
    headers = {"Host": "example.test", "Upgrade": "websocket", "Connection": "Upgrade",
               "Sec-WebSocket-Protocol": "chat, superchat", "User-Agent": "test-client/1.0"}
    assert rounded(tape_from_pcap(capture.write(tmp_path / "three.pcap"))) == [
        Opened(200.104, 1, "/ws/live?model=m", "chat", headers),
        Opened(200.6, 2, "/ws/live?model=m", "chat", headers),
        Message(201.0, 1, "client", "one"),
        Message(202.0, 2, "client", "two"),
        Closed(203.0, 1, None, "", None),
        Closed(204.504, 2, None, "", None),  # the capture's end, not its last packet (204.0)
    ]


def compressed(compressor: zlib._Compress, data: bytes) -> bytes:
    """One permessage-deflate message (RFC 7692): deflated, flushed, its 4-byte tail cut."""
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return out.removesuffix(b"\x00\x00\xff\xff")


def test_permessage_deflate_on_ws_is_inflated(tmp_path: Path) -> None:
    """Compressed messages on plain ws:// come out inflated: one that refers back to the one
    before (the compressor's context kept), a binary one, a fragmented one, and an uncompressed
    one between them."""
    s = opened(Session(), 100.0)
    up, down = zlib.compressobj(wbits=-15), zlib.compressobj(wbits=-15)
    setup = b'{"setup": {"model": "models/m"}}'

    def rsv1(frame: bytes) -> bytes:
        return bytes([frame[0] | 0x40]) + frame[1:]

    s.up(100.1, data=rsv1(ws_frame(1, compressed(up, setup), masked=True)))
    s.up(100.2, data=rsv1(ws_frame(1, compressed(up, setup), masked=True)))
    s.down(100.3, data=rsv1(ws_frame(2, compressed(down, bytes(range(256)) * 4), masked=False)))
    s.down(100.4, data=ws_frame(1, b"plain", masked=False))
    parts = compressed(down, b"fragmented " * 20)
    s.down(100.5, data=bytes([0x41]) + ws_frame(1, parts[:10], masked=False)[1:]
           + ws_frame(0, parts[10:], masked=False))
    messages = [r.data for r in tape_from_pcap(s.write(tmp_path / "deflate.pcap"))
                if isinstance(r, Message)]
    assert messages == [setup.decode(), setup.decode(), bytes(range(256)) * 4, "plain",
                        "fragmented " * 20]


def test_payloads_change_nothing_else_in_the_walk(tmp_path: Path) -> None:
    """The walk asked for payloads reports the same flows and frames as `pcap inspect`'s, whose
    frames carry no message."""
    s = opened(Session(), 100.0)
    s.up(100.1, data=ws_frame(1, b'{"setup": {}}', masked=True))
    s.down(100.2, data=ws_frame(8, REAPING, masked=False))
    path = s.write(tmp_path / "ws.pcap")
    plain, with_payloads = analyse(path), analyse(path, payloads=True)
    assert plain.to_dict() == with_payloads.to_dict()
    assert [f.message for _, f in plain.flows[0].frames] == [None, None]
    assert [f.message for _, f in with_payloads.flows[0].frames] == ['{"setup": {}}', None]
    assert plain.flows[0].up.handshake is None


def test_a_capture_without_a_websocket_is_a_clear_error(tmp_path: Path) -> None:
    """A capture of plain HTTP, or of nothing TCP, gives no tape, and says why."""
    s = opened(Session(), 100.0, b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\n")
    with pytest.raises(TapeSourceError, match="no WebSocket in this capture"):
        tape_from_pcap(s.write(tmp_path / "http.pcap"))


def test_a_stream_with_a_hole_is_a_clear_error(tmp_path: Path) -> None:
    """A client stream that lost a segment for good (the frames behind it never read) gives no
    tape, rather than one without the messages after the hole."""
    path = tmp_path / "hole.pcap"
    write_capture(path, behind_a_hole(40001, 3, ws_frame(1, b'{"setup": {}}', masked=True)))
    with pytest.raises(TapeSourceError, match="lost part of the client's stream"):
        tape_from_pcap(path)


def test_tls_that_cannot_be_read_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS without a key log, or without tshark to read it with, gives no tape (rather than one
    without the connections inside TLS), and the error says what to give."""
    pcap = fake_tls(tmp_path / "tls.pcap")
    with pytest.raises(TapeSourceError, match="--keylog FILE"):
        tape_from_pcap(pcap)
    keylog = tmp_path / "keys.log"
    keylog.write_text("")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TapeSourceError, match=TSHARK_HINT):
        tape_from_pcap(pcap, [keylog])


# Real TLS, recorded in a network namespace of the test's own (root), read with its key logs.

PLAN = SessionPlan(up_frames=5, reply_every=5, reply_chunks=3)


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "permessage-deflate"])
def wss(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A run-like folder: a wss:// session (compressed or not) and its key logs."""
    yield record(replace(PLAN, compression=request.param), tmp_path_factory.mktemp("wss"))


@pytest.mark.lab
@needs_tshark
def test_a_wss_conversation_becomes_its_tape(wss: Path) -> None:
    """Inside TLS, read with the run's key logs: the opening, every text message each way as it
    was sent (inflated when compressed), the client's close."""
    records = tape_from_pcap(wss / "capture.pcap")
    opening, *said, close = records
    assert isinstance(opening, Opened) and isinstance(close, Closed)
    assert (opening.conn, opening.path, opening.subprotocol) == (1, "/", None)
    assert opening.headers is not None and opening.headers["Host"] == "localhost"
    assert "websockets" in opening.headers["User-Agent"]
    client, server = texts(PLAN)
    assert [m.data for m in said if isinstance(m, Message) and m.sender == "client"] == client
    assert [m.data for m in said if isinstance(m, Message) and m.sender == "server"] == server
    assert all(isinstance(m, Message) and m.conn == 1 for m in said)
    assert (close.code, close.reason, close.by) == (*CLIENT_CLOSE, "client")
    assert [r.t for r in records] == sorted(r.t for r in records)


@pytest.mark.lab
@needs_tshark
def test_a_key_log_of_other_connections_is_a_clear_error(wss: Path, tmp_path: Path) -> None:
    """A key log that decrypts nothing of the capture gives no tape."""
    other = tmp_path / "other.log"
    other.write_text("")
    pcap = tmp_path / "capture.pcap"  # away from the run's key logs
    pcap.write_bytes((wss / "capture.pcap").read_bytes())
    with pytest.raises(TapeSourceError, match="decrypted none of the 1 TLS flow"):
        tape_from_pcap(pcap, [other])
