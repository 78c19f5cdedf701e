import io
import struct
from pathlib import Path

from faultlab.capture.flows import analyse, render_text
from faultlab.capture.pcap import (
    ACK,
    FIN,
    PSH,
    RST,
    SYN,
    PcapStream,
    build_tcp_packet,
    decode_tcp,
    write_header,
    write_record,
)

C, S = "198.18.0.2", "198.18.0.6"


def ws_frame(opcode: int, payload: bytes, masked: bool) -> bytes:
    head = bytes([0x80 | opcode])
    if masked:
        key = b"\x01\x02\x03\x04"
        body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        return head + bytes([0x80 | len(payload)]) + key + body
    return head + bytes([len(payload)]) + payload


def conversation(path: Path) -> None:
    """A ws:// session: handshake, frames, a retransmission, a keepalive, a close, then silence."""
    cs, ss = 1000, 5000
    pkts: list[tuple[float, bytes]] = []

    def up(t: float, flags: int, data: bytes = b"") -> None:
        nonlocal cs
        pkts.append((t, build_tcp_packet(C, 40000, S, 8765, cs, ss, flags, data)))
        cs += len(data) + (1 if flags & (SYN | FIN) else 0)

    def down(t: float, flags: int, data: bytes = b"") -> None:
        nonlocal ss
        pkts.append((t, build_tcp_packet(S, 8765, C, 40000, ss, cs, flags, data)))
        ss += len(data) + (1 if flags & (SYN | FIN) else 0)

    up(100.0, SYN)
    down(100.001, SYN | ACK)
    up(100.002, ACK)
    up(100.003, PSH | ACK, b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n")
    down(100.004, PSH | ACK, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
    frame = ws_frame(1, b"hello", masked=True)
    # The client's text frame arrives split over two segments.
    up(100.100, PSH | ACK, frame[:4])
    up(100.101, PSH | ACK, frame[4:])
    down(100.102, PSH | ACK, ws_frame(1, b"hello", masked=False))
    # The server's next frame is retransmitted once.
    tick = ws_frame(2, b"\x00" * 10, masked=False)
    down(100.2, PSH | ACK, tick)
    pkts.append((100.4, build_tcp_packet(S, 8765, C, 40000, ss - len(tick), cs, PSH | ACK, tick)))
    # A TCP keepalive from the client: one byte below its next sequence number.
    pkts.append((101.0, build_tcp_packet(C, 40000, S, 8765, cs - 1, ss, ACK)))
    # Then the client closes with 1001 and FIN after a 2 s silence of the server.
    up(102.0, PSH | ACK, ws_frame(8, struct.pack("!H", 1001) + b"going away", masked=True))
    up(102.1, FIN | ACK)
    down(104.0, RST)
    with path.open("wb") as f:
        write_header(f)
        for t, p in pkts:
            write_record(f, t, p)


def test_flow_statistics(tmp_path: Path) -> None:
    """Per direction: packets, FIN/RST, retransmissions, keepalives and the longest silence."""
    path = tmp_path / "c.pcap"
    conversation(path)
    report = analyse(path)
    (flow,) = report.flows
    assert (flow.client, flow.client_port, flow.server, flow.server_port) == (C, 40000, S, 8765)
    assert flow.up.packets == 8 and flow.down.packets == 6
    assert flow.up.fin == 1 and flow.up.rst == 0
    assert flow.down.rst == 1 and flow.down.fin == 0
    assert flow.down.retransmissions == 1 and flow.up.retransmissions == 0
    assert flow.up.keepalives == 1
    assert abs(flow.down.longest_silence_s - 3.6) < 1e-6  # 100.4 -> 104.0


def test_websocket_frames_are_decoded(tmp_path: Path) -> None:
    """Frames are reassembled across segments, retransmissions are not doubled, closes decoded."""
    path = tmp_path / "c.pcap"
    conversation(path)
    (flow,) = analyse(path).flows
    frames = [(d, f.opcode, f.length, f.close_code, f.close_reason) for d, f in flow.frames]
    assert frames == [
        ("client->server", "text", 5, None, None),
        ("server->client", "text", 5, None, None),
        ("server->client", "binary", 10, None, None),
        ("client->server", "close", 12, 1001, "going away"),
    ]
    text = render_text(analyse(path))
    assert "code=1001 reason='going away'" in text


def test_pcap_stream_accepts_any_chunking(tmp_path: Path) -> None:
    """Records come out whole however the bytes are split on the way."""
    buf = io.BytesIO()
    write_header(buf)
    for i in range(50):
        write_record(buf, 10 + i / 100, build_tcp_packet(C, 1, S, 2, i, 0, ACK, b"x" * i))
    data = buf.getvalue()
    for step in (1, 7, 64, len(data)):
        stream = PcapStream()
        records = [r for i in range(0, len(data), step) for r in stream.feed(data[i:i + step])]
        assert len(records) == 50
        seg = decode_tcp(stream.linktype, *records[49])
        assert seg is not None and seg.payload == b"x" * 49 and seg.seq == 49
