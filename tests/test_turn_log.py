"""The TURN server's log read as events (faultlab.turn_log), on lines coturn 4.6 wrote in the
lab: an allocation over UDP, TCP and TLS, a credential refused, the sessions' ends; a restart."""

from __future__ import annotations

from pathlib import Path

from faultlab.events import Event
from faultlab.turn_log import TurnLog, TurnLogTail
from faultlab.vocabulary import record_of

# From turn.log of a run of tests/lab/turn_client.py (its addresses), and one refusal.
LOG = """\
1: : IPv4. UDP listener opened on: 198.18.189.118:3478
0: : session 000000000000000001: realm <faultlab> user <>: incoming packet message processed, error 401: Unauthorized
0: : IPv4. Local relay addr: 198.18.189.118:51833
0: : session 000000000000000001: new, realm=<faultlab>, username=<1796675281:faultlab>, lifetime=600
0: : session 000000000000000001: refreshed, realm=<faultlab>, username=<1796675281:faultlab>, lifetime=0
0: : IPv4. tcp or tls connected to: 198.18.189.114:34952
0: : IPv4. Local relay addr: 198.18.189.118:57711
0: : session 000000000000000002: new, realm=<faultlab>, username=<1796675281:faultlab>, lifetime=600
0: : session 000000000000000002: TCP socket closed remotely 198.18.189.114:34952
0: : session 000000000000000002: usage: realm=<faultlab>, username=<1796675281:faultlab>, rp=5, rb=446, sp=4, sb=364
0: : session 000000000000000002: peer usage: realm=<faultlab>, username=<1796675281:faultlab>, rp=0, rb=0, sp=1, sb=38
0: : session 000000000000000002: closed (2nd stage), user <1796675281:faultlab> realm <faultlab> origin <>, local 198.18.189.118:3478, remote 198.18.189.114:34952, reason: TCP connection closed by client (callback)
0: : IPv4. Local relay addr: 198.18.189.118:54204
0: : session 001000000000000001: new, realm=<faultlab>, username=<1796675281:faultlab>, lifetime=600, cipher=ECDHE-ECDSA-AES256-GCM-SHA384, method=TLSv1.2
0: : session 001000000000000001: usage: realm=<faultlab>, username=<1796675281:faultlab>, rp=5, rb=447, sp=4, sb=364
0: : session 001000000000000001: closed (2nd stage), user <1796675281:faultlab> realm <faultlab> origin <>, local 198.18.189.118:5349, remote 198.18.189.114:34472, reason: TLS/TCP connection closed by client (callback)
3: : session 000000000000000003: realm <faultlab> user <1796675281:faultlab>: incoming packet ALLOCATE processed, error 401: Unauthorized
"""  # noqa: E501 (coturn's lines as it writes them)


def test_each_session_s_allocation_refusal_and_end_are_events() -> None:
    """coturn's challenge (a 401 before any user) is no refusal; a UDP session has no end in the
    log; a TCP or TLS one has, told apart by the listener's port, with its bytes each way."""
    log = TurnLog()
    events = [e for e in map(log.read, LOG.splitlines()) if e is not None]
    assert events == [
        {"event": "turn.allocation", "session": "000000000000000001",
         "relayed": "198.18.189.118:51833", "tls": False},
        {"event": "turn.allocation", "session": "000000000000000002",
         "relayed": "198.18.189.118:57711", "tls": False},
        {"event": "turn.closed", "session": "000000000000000002", "client": "198.18.189.114:34952",
         "transport": "tcp", "reason": "TCP connection closed by client (callback)",
         "bytes_from_client": 446, "bytes_to_client": 364},
        {"event": "turn.allocation", "session": "001000000000000001",
         "relayed": "198.18.189.118:54204", "tls": True},
        {"event": "turn.closed", "session": "001000000000000001", "client": "198.18.189.114:34472",
         "transport": "tls", "reason": "TLS/TCP connection closed by client (callback)",
         "bytes_from_client": 447, "bytes_to_client": 364},
        {"event": "turn.refused", "session": "000000000000000003", "request": "ALLOCATE",
         "code": 401, "reason": "Unauthorized"},
    ]
    for fields in events:  # each is an event of the vocabulary, its fields its record's
        name = str(fields.pop("event"))
        record = record_of(name)
        assert record is not None and record.read(Event(1.0, "turn", name, fields)) is not None


def test_a_udp_session_s_end_a_restart_and_a_relay_line_out_of_place() -> None:
    """A session whose client never connected over TCP ended over UDP (an allocation's
    expiry); a restarted server's banner forgets the sessions before it (it numbers them from 1
    again); a relay address not on the line just before a session's start is not guessed."""
    log = TurnLog()
    lines = [
        "0: : IPv4. tcp or tls connected to: 198.18.189.114:34952",
        "0: : session 000000000000000001: usage: realm=<faultlab>, username=<1:faultlab>, "
        "rp=9, rb=900, sp=8, sb=800",
        "RFC 3489/5389/5766/5780/6062/6156 STUN/TURN Server",
        "0: : IPv4. Local relay addr: 198.18.189.118:51833",
        "0: : session 001000000000000001: refreshed, realm=<faultlab>, lifetime=0",
        "0: : session 000000000000000001: new, realm=<faultlab>, username=<1:faultlab>, "
        "lifetime=600",
        "9: : session 000000000000000001: closed (2nd stage), user <1:faultlab> realm <faultlab> "
        "origin <>, local 198.18.189.118:3478, remote 198.18.189.114:34952, reason: allocation "
        "timeout",
    ]
    events = [e for e in map(log.read, lines) if e is not None]
    assert events == [
        {"event": "turn.allocation", "session": "000000000000000001", "relayed": None,
         "tls": False},
        {"event": "turn.closed", "session": "000000000000000001", "client": "198.18.189.114:34952",
         "transport": "udp", "reason": "allocation timeout", "bytes_from_client": None,
         "bytes_to_client": None},
    ]


def test_the_tail_reads_the_log_as_it_is_written(tmp_path: Path) -> None:
    """A line still being written waits for its newline."""
    path = tmp_path / "turn.log"
    tail = TurnLogTail(path)
    assert list(tail.read_new()) == []  # not there yet
    lines = LOG.splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:20])
    assert list(tail.read_new()) == []
    with path.open("a") as f:
        f.write(lines[3][20:])
    assert [e["event"] for e in tail.read_new()] == ["turn.allocation"]
