import json
import struct
from datetime import datetime
from pathlib import Path

import pytest

from faultlab.capture.behaviour import ServerReport
from faultlab.capture.flows import analyse
from faultlab.capture.pcap import ACK, FIN, PSH, RST, SYN, build_tcp_packet, write_header, write_record

from .conftest import faultlab
from .test_pcap import REQUEST, RESPONSE, C, S, ws_frame

PORT, SPORT = 40000, 8765


class Session:
    """A plain ws:// connection written packet by packet: each end's sequence numbers advance
    as it sends, and `retransmit` repeats the server's last segment."""

    def __init__(self, port: int = PORT) -> None:
        self.port = port
        self.cs, self.ss = 1000, 5000
        self.packets: list[tuple[float, bytes]] = []
        self._last_down: tuple[int, int, bytes] = (0, 0, b"")

    def up(self, t: float, flags: int = PSH | ACK, data: bytes = b"") -> None:
        self.packets.append((t, build_tcp_packet(C, self.port, S, SPORT, self.cs, self.ss, flags,
                                                 data)))
        self.cs += len(data) + (1 if flags & (SYN | FIN) else 0)

    def down(self, t: float, flags: int = PSH | ACK, data: bytes = b"") -> None:
        self._last_down = (self.ss, flags, data)
        self.packets.append((t, build_tcp_packet(S, SPORT, C, self.port, self.ss, self.cs, flags,
                                                 data)))
        self.ss += len(data) + (1 if flags & (SYN | FIN) else 0)

    def retransmit(self, t: float) -> None:
        seq, flags, data = self._last_down
        self.packets.append((t, build_tcp_packet(S, SPORT, C, self.port, seq, self.cs, flags, data)))

    def keepalive(self, t: float) -> None:
        """A TCP keepalive from the server: no data, one byte behind its next sequence number."""
        self.packets.append((t, build_tcp_packet(S, SPORT, C, self.port, self.ss - 1, self.cs, ACK)))

    def opened(self, t: float = 100.0) -> "Session":
        self.up(t, SYN)
        self.down(t + 0.001, SYN | ACK)
        self.up(t + 0.002, ACK)
        self.up(t + 0.003, data=REQUEST)
        self.down(t + 0.004, data=RESPONSE)
        self.up(t + 0.1, data=ws_frame(1, b'{"setup": {}}', masked=True))
        self.down(t + 0.2, data=ws_frame(1, b'{"setupComplete": {}}', masked=False))
        self.up(t + 0.25, ACK)
        return self

    def write(self, path: Path) -> Path:
        with path.open("wb") as f:
            write_header(f)
            for t, pkt in self.packets:
                write_record(f, t, pkt)
        return path


def server_view(path: Path) -> dict:
    """The report's first connection (the session's)."""
    return ServerReport.of(analyse(path)).to_dict()["connections"][0]


def test_unanswered_retransmissions_then_nothing_is_giving_up(tmp_path: Path) -> None:
    """The server's TCP gave up at its last retransmission when the client answered none of the
    run and the server sent nothing after it; the run's length and start are given."""
    s = Session().opened()
    s.down(110.0, data=ws_frame(2, b"\x00" * 300, masked=False))
    for t in (110.2, 110.6, 111.4, 113.0):  # RTO doubling from 0.2 s, as L8
        s.retransmit(t)
    s.up(120.0, ACK)  # a client packet, then the server retransmits again, unanswered
    for t in (120.5, 121.5, 123.5):
        s.retransmit(t)
    s.up(124.0 - 0.1, ACK)
    s.retransmit(125.0)
    s.retransmit(129.0)
    # The capture goes on (another connection's packet) past when the next one was due (t=137).
    s.packets.append((140.0, build_tcp_packet(C, PORT + 1, S, SPORT, 1, 0, SYN)))
    conn = server_view(s.write(tmp_path / "gave-up.pcap"))
    gave = conn["server_gave_up"]
    assert gave["how"] == "retransmissions" and gave["retransmissions"] == 2
    assert gave["at"]["t"] == pytest.approx(29.0) and gave["first"]["t"] == pytest.approx(25.0)
    assert conn["server_retransmissions"]["count"] == 9
    # Retransmissions are not data: the server's silence runs from its last new data at t=10 to
    # the capture's end (t=40; the connection never ended).
    assert conn["server_silence"]["longest_s"] == pytest.approx(30.0)
    assert conn["server_silence"]["from"]["t"] == pytest.approx(10.0)
    assert conn["last_data"]["by"] == "server"


def test_a_capture_that_ends_mid_backoff_shows_a_server_still_retransmitting(
        tmp_path: Path) -> None:
    """Unanswered retransmissions up to the capture's end, the next not yet due: no giving up
    is claimed, the server is still retransmitting."""
    s = Session().opened()
    s.down(110.0, data=ws_frame(2, b"\x00" * 300, masked=False))
    for t in (110.2, 110.6, 111.4, 113.0):
        s.retransmit(t)
    s.packets.append((115.0, build_tcp_packet(C, PORT + 1, S, SPORT, 1, 0, SYN)))  # < 113 + 3.2
    conn = server_view(s.write(tmp_path / "mid-backoff.pcap"))
    assert conn["server_gave_up"] is None and conn["server_retransmitting_at_end"] is True


@pytest.mark.parametrize("after", ["client answers", "server sends more"])
def test_retransmissions_followed_by_traffic_are_not_giving_up(tmp_path: Path, after: str) -> None:
    """A run of retransmissions that the client answered, or after which the server still sent
    something, is no giving up."""
    s = Session().opened()
    s.down(110.0, data=ws_frame(2, b"\x01" * 100, masked=False))
    s.retransmit(110.2)
    s.retransmit(110.6)
    if after == "client answers":
        s.up(110.7, ACK)
    else:
        s.keepalive(140.0)
    conn = server_view(s.write(tmp_path / "answered.pcap"))
    assert conn["server_gave_up"] is None
    assert conn["server_retransmissions"]["count"] == 2


def test_a_server_reset_is_giving_up(tmp_path: Path) -> None:
    """A RST from the server is its TCP giving up, at the RST; the connection ends there."""
    s = Session().opened()
    s.down(105.0, RST)
    s.up(130.0, ACK)  # whatever comes later, the connection's end is its last packet
    conn = server_view(s.write(tmp_path / "rst.pcap"))
    assert conn["server_gave_up"]["how"] == "reset"
    assert conn["server_gave_up"]["at"]["t"] == pytest.approx(5.0)
    assert conn["ended"] is True and conn["end"]["t"] == pytest.approx(30.0)


def test_keepalives_and_pings_of_the_server_are_told_from_the_clients(tmp_path: Path) -> None:
    """Server keepalives and WebSocket pings are counted with the first one's time; the client's
    own pings and keepalives are not the server's."""
    quiet = Session().opened()
    quiet.up(101.0, data=ws_frame(9, b"c", masked=True))
    quiet.down(101.01, data=ws_frame(10, b"c", masked=False))
    quiet.packets.append((102.0, build_tcp_packet(C, PORT, S, SPORT, quiet.cs - 1, quiet.ss, ACK)))
    conn = server_view(quiet.write(tmp_path / "quiet.pcap"))
    assert conn["server_pings"] == {"count": 0, "first": None}
    assert conn["server_keepalives"] == {"count": 0, "first": None}

    busy = Session().opened()
    busy.keepalive(160.0)
    busy.keepalive(220.0)
    busy.down(230.0, data=ws_frame(9, b"s", masked=False))
    conn = server_view(busy.write(tmp_path / "busy.pcap"))
    assert conn["server_keepalives"]["count"] == 2
    assert conn["server_keepalives"]["first"]["t"] == pytest.approx(60.0)
    assert conn["server_pings"]["count"] == 1
    assert conn["server_pings"]["first"]["t"] == pytest.approx(130.0)


def test_a_reaping_close_says_how_long_the_client_had_been_silent(tmp_path: Path) -> None:
    """L7: the server's close 1011 480 s after the client's last packet, and after its last data
    (an ACK came later than the data); an echo of the client's close is told apart."""
    s = Session().opened()
    s.up(110.0, data=ws_frame(1, b'{"realtimeInput": {"audio": {}}}', masked=True))
    s.up(110.5, ACK)
    close = ws_frame(8, struct.pack("!H", 1011) + b"Internal error encountered.", masked=False)
    s.down(590.5, data=close)
    s.up(590.6, data=ws_frame(8, struct.pack("!H", 1011), masked=True))
    conn = server_view(s.write(tmp_path / "reaped.pcap"))
    got = conn["server_close"]
    assert (got["code"], got["reason"]) == (1011, "Internal error encountered.")
    assert got["client_silent_s"] == pytest.approx(480.0)
    assert got["client_data_silent_s"] == pytest.approx(480.5)
    assert got["answers_client_close"] is None
    assert conn["server_silence"]["longest_s"] == pytest.approx(590.5 - 100.2)

    echo = Session().opened()
    echo.up(110.0, data=ws_frame(8, struct.pack("!H", 1000) + b"bye", masked=True))
    echo.down(110.02, data=ws_frame(8, struct.pack("!H", 1000) + b"bye", masked=False))
    got = server_view(echo.write(tmp_path / "echo.pcap"))["server_close"]
    assert got["answers_client_close"]["code"] == 1000
    assert got["client_silent_s"] == pytest.approx(0.02)


def test_the_silence_to_the_end_stops_at_the_connections_end(tmp_path: Path) -> None:
    """A connection closed with a FIN each way is silent until its last packet, not until the
    end of the capture; one still open is silent until the capture ends."""
    s = Session().opened()
    s.down(101.0, data=ws_frame(1, b"late", masked=False))
    s.up(102.0, FIN | ACK)
    s.down(102.1, FIN | ACK)
    s.up(102.2, ACK)
    s.packets += Session(PORT + 1).opened(150.0).packets  # another connection, later
    report = ServerReport.of(analyse(s.write(tmp_path / "two.pcap"))).to_dict()
    closed, open_ = report["connections"]
    assert closed["ended"] and closed["server_silence"]["longest_s"] == pytest.approx(1.2)
    assert closed["server_silence"]["to_end"] is True
    assert not open_["ended"]
    assert open_["server_silence"]["longest_s"] == pytest.approx(0.196)  # 150.004 -> 150.2
    assert open_["server_silence"]["to_end"] is False


def test_times_are_relative_and_clock_times(tmp_path: Path) -> None:
    """Every moment is seconds since the capture's start and the local clock time of it."""
    s = Session().opened(1_790_000_000.0)
    conn = server_view(s.write(tmp_path / "clock.pcap"))
    last = conn["last_data"]
    assert last["t"] == pytest.approx(0.2)
    assert datetime.fromisoformat(last["clock"]).timestamp() == pytest.approx(1_790_000_000.2,
                                                                               abs=1e-3)


def test_server_command_prefers_the_run_folders_server_capture(tmp_path: Path) -> None:
    """`pcap server DIR` reads server.pcap when the run has one, else capture.pcap with a note
    that the proxy stood in for the server; `pcap inspect DIR` reads capture.pcap."""
    run = tmp_path / "run"
    run.mkdir()
    client_leg = Session().opened()
    client_leg.down(120.0, RST)
    client_leg.write(run / "capture.pcap")
    (run / "keys.log").write_text("")
    done = faultlab("pcap", "server", str(run), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["file"] == str(run / "capture.pcap")
    assert any("no server.pcap" in note for note in report["notes"])
    assert report["connections"][0]["server_gave_up"]["how"] == "reset"

    Session().opened().write(run / "server.pcap")
    report = json.loads(faultlab("pcap", "server", str(run), "--json").stdout)
    assert report["file"] == str(run / "server.pcap") and report["notes"] == []
    assert report["connections"][0]["server_gave_up"] is None
    inspected = json.loads(faultlab("pcap", "inspect", str(run), "--json").stdout)
    assert inspected["file"] == str(run / "capture.pcap")
    text = faultlab("pcap", "server", str(run)).stdout
    assert "connection 1: 198.18.0.2:40000 -> 198.18.0.6:8765" in text
    assert "TCP gave up      no" in text and "WebSocket pings  none" in text
