"""forge_rst: its parameters, the packets it forges (read back with scapy), the sequence numbers it
picks from what the router sees (sans I/O), its exchange over fake sockets, and that it is applied
once with nothing to revert."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from scapy.layers.inet import IP, TCP

from faultlab.capture.pcap import ACK, FIN, LINKTYPE_RAW, PSH, RST, Segment, decode_tcp
from faultlab.errors import MechanismError, ProfileError
from faultlab.faults import forge_rst
from faultlab.faults.forge_rst import ATTEMPTS, ETH_P_IP, PROBE_AFTER_S, SETTLE_S, Flow, Forged, Forger

from .conftest import (
    CLIENT,
    SERVER,
    SERVER_PORT,
    FakeContext,
    build,
    params_of,
    refusal,
    validate,
    with_connections,
)

FLOW = Flow(CLIENT, 50000, SERVER, SERVER_PORT)


def from_client(seq: int, ack: int, data: bytes = b"", flags: int = ACK) -> Segment:
    return Segment(0.0, CLIENT, 50000, SERVER, SERVER_PORT, seq, ack, flags, data)


def from_server(seq: int, ack: int, data: bytes = b"", flags: int = ACK) -> Segment:
    return Segment(0.0, SERVER, SERVER_PORT, CLIENT, 50000, seq, ack, flags, data)


def test_defaults_reset_both_ends_of_the_latest_connection() -> None:
    """With no parameters it resets both ends of the latest connection."""
    assert params_of("forge_rst").model_dump() == {"connection": "latest", "toward": "both"}


@pytest.mark.parametrize(("params", "field"), [
    ({"toward": "router"}, "toward"),
    ({"connection": 0}, "connection"),
    ({"direction": "both"}, "direction"),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object], field: str) -> None:
    """A value out of its choices, or a field it does not have, is refused naming that field."""
    assert list(refusal("forge_rst", params)) == [field]


def test_a_forged_rst_is_a_valid_packet_from_the_other_end() -> None:
    """The RST toward the client comes from the server's address and port, with the given
    sequence number, no ACK, window 0, and checksums scapy agrees with."""
    raw = Forged("client", 0xFFFFFFF0, 0, RST).packet(FLOW)
    pkt = IP(raw)
    assert (pkt[IP].src, pkt[IP].dst, pkt[TCP].sport, pkt[TCP].dport) == (
        SERVER, CLIENT, SERVER_PORT, 50000)
    assert (pkt[TCP].seq, pkt[TCP].flags, pkt[TCP].window, pkt[IP].ttl) == (0xFFFFFFF0, "R", 0, 64)
    ip_sum, tcp_sum = pkt[IP].chksum, pkt[TCP].chksum
    del pkt[IP].chksum, pkt[TCP].chksum
    again = IP(bytes(pkt))
    assert (again[IP].chksum, again[TCP].chksum) == (ip_sum, tcp_sum)
    assert decode_tcp(LINKTYPE_RAW, 0.0, raw) == Segment(0.0, SERVER, SERVER_PORT, CLIENT, 50000,
                                                         0xFFFFFFF0, 0, RST, b"")


def test_the_rst_takes_the_targets_ack_number() -> None:
    """Toward the client: the client's next segment names its rcv_nxt in its ACK field; the RST
    carries exactly that, sent once."""
    forger = Forger(FLOW, ("client",))
    assert forger.see(from_client(500, 1000, b"x" * 10), 0.01) == [Forged("client", 1000, 0, RST)]
    assert forger.see(from_client(510, 1000), 0.011) == []


def test_data_the_peer_sent_meanwhile_moves_the_rst_on() -> None:
    """Server data seen before the client's ACK is still on its way to the client, ahead of the
    RST: the RST takes the sequence number after it (modulo 2**32)."""
    forger = Forger(FLOW, ("client",))
    forger.see(from_server(0xFFFFFF00, 77, b"y" * 0x200, ACK | PSH), 0.0)
    assert forger.see(from_client(77, 0xFFFFFF00), 0.001) == [Forged("client", 0x100, 0, RST)]


def test_a_challenge_ack_names_the_exact_number_for_the_next_rst() -> None:
    """A target answering the RST with an ACK (RFC 5961's challenge: the RST was in the window but
    not at rcv_nxt) gets a second RST at that ACK's number; at most ATTEMPTS in all."""
    forger = Forger(FLOW, ("server",))
    forger.see(from_client(1000, 5, b"z" * 100), 0.0)
    assert forger.see(from_server(5, 900), 0.001) == [Forged("server", 1100, 0, RST)]
    assert forger.see(from_server(5, 1040), 0.002) == [Forged("server", 1040, 0, RST)]
    for n in range(ATTEMPTS):
        forger.see(from_server(5, 1041 + n), 0.003)
    assert forger.sent["server"] == [1100, 1040, 1041]


def test_a_retry_takes_the_peers_data_sent_after_the_last_rst() -> None:
    """Data the peer sent after a RST, continuing from the challenge's number, reaches the end
    before the retry does: the retry takes the sequence number after it (the lab's case: the
    server's 7-byte tick between the RST and the client's challenge). Data that leaves a gap
    does not move it."""
    forger = Forger(FLOW, ("client",))
    forger.see(from_server(500, 77), 0.0)
    forger.see(from_client(77, 490), 0.001)  # its first RST at 500: not the client's rcv_nxt 498
    forger.see(from_server(498, 77, b"t" * 7, ACK | PSH), 0.002)
    forger.see(from_server(600, 77, b"g" * 9, ACK | PSH), 0.0025)  # after a gap: no use
    assert forger.see(from_client(77, 498), 0.003) == [Forged("client", 505, 0, RST)]
    assert forger.sent["client"] == [500, 505]


def test_its_own_packets_seen_going_out_are_not_the_flows() -> None:
    """The listener sees the RST it sent toward the client leave: that is no RST of the flow's, and
    no data of the server's."""
    forger = Forger(FLOW, ("client",))
    forger.see(from_client(1, 2000), 0.0)
    forger.see(from_server(2000, 0, flags=RST), 0.0005)
    assert forger.closed == set() and "server" not in forger.next_seq


def test_a_silent_target_is_probed_once_far_outside_its_window() -> None:
    """Silent for PROBE_AFTER_S, the target gets one byte from its peer half the sequence space
    away from the peer's latest, which it answers with a duplicate ACK naming its rcv_nxt."""
    forger = Forger(FLOW, ("server",))
    forger.see(from_client(3000, 40), 0.0)
    assert forger.tick(PROBE_AFTER_S / 2) == []
    probe = Forged("server", 3000 + (1 << 31), 0, ACK, b"\0")
    assert forger.tick(PROBE_AFTER_S) == [probe]
    assert forger.tick(PROBE_AFTER_S * 2) == []
    # The probe itself, seen by the listener on its way, changes nothing.
    assert forger.see(from_client(3000 + (1 << 31), 0, b"\0"), 0.06) == []
    assert forger.see(from_server(40, 3000), 0.061) == [Forged("server", 3000, 0, RST)]


def test_it_is_done_once_every_target_had_its_rst_and_no_challenge_came() -> None:
    """Done SETTLE_S after the last RST to the last target; a RST of the flow's own (an end that
    answered a stranger) counts as reaching both ends."""
    forger = Forger(FLOW, ("client", "server"))
    forger.see(from_client(1, 2), 0.01)
    assert not forger.done(0.01 + SETTLE_S)
    forger.see(from_server(2, 1), 0.02)
    assert not forger.done(0.02 + SETTLE_S / 2) and forger.done(0.02 + SETTLE_S * 1.01)
    other = Forger(FLOW, ("client", "server"))
    other.see(from_server(9, 9, flags=RST | ACK), 0.0)
    assert other.done(SETTLE_S)


class Listener:
    """A packet socket that hands out `packets` then times out."""

    def __init__(self, packets: list[bytes]) -> None:
        self.packets = packets

    def settimeout(self, value: float) -> None:
        assert value > 0

    def recvfrom(self, size: int) -> tuple[bytes, tuple[str, int, int, int, bytes]]:
        if not self.packets:
            raise TimeoutError
        return self.packets.pop(0), ("c0", ETH_P_IP, 4, 1, b"")


class Sender:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, tuple[str, int]]] = []

    def sendto(self, data: bytes, address: tuple[str, int]) -> None:
        self.sent.append((data, address))


def test_the_exchange_sends_what_the_forger_says_and_logs_it() -> None:
    """Over fake sockets: the client's ACK in, the RST out to the client's address, logged with
    its numbers and its time after the step fired."""
    listen = Listener([Forged("server", 700, 1234, ACK | FIN).packet(FLOW)])
    send = Sender()
    forger = Forger(FLOW, ("client",))
    log = forge_rst.exchange(forger, listen, send, fired=time.monotonic())  # type: ignore[arg-type]
    assert [(d, a) for d, a in send.sent] == [(Forged("client", 1234, 0, RST).packet(FLOW),
                                               (CLIENT, 0))]
    assert [{k: v for k, v in entry.items() if k != "t_ms"} for entry in log] == [
        {"to": "client", "seq": 1234, "ack": 0, "flags": "R"}]
    assert 0 <= log[0]["t_ms"] < 1000


def test_a_flow_that_never_speaks_fails_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """No packet of the flow, even after the probe: a mechanism failure naming the wait."""
    monkeypatch.setattr(forge_rst, "WAIT_S", 0.1)
    send = Sender()
    with pytest.raises(MechanismError, match=r"no sequence numbers within 0\.1 s"):
        forge_rst.exchange(Forger(FLOW, ("server",)), Listener([]), send,  # type: ignore[arg-type]
                           time.monotonic())
    assert len(send.sent) == 1, "the silent server was probed once"


def test_a_stopped_exchange_returns_at_once() -> None:
    """When the run ends meanwhile (`stop` set), the exchange returns what it sent so far."""
    stop = threading.Event()
    stop.set()
    send = Sender()
    assert forge_rst.exchange(Forger(FLOW, ("client",)), Listener([]), send,  # type: ignore[arg-type]
                              time.monotonic(), stop) == []
    assert send.sent == []


def test_apply_watches_the_client_link_and_reports_what_it_sent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Applied: the router opens its listener on the client link and its raw sender; the details
    name the connection, each packet sent and the time to the first RST."""
    seen: list[Forger] = []

    def fake_exchange(forger: Forger, listen: Any, send: Any, fired: float,
                      stop: Any) -> list[dict[str, Any]]:
        seen.append(forger)
        return [{"to": "client", "seq": 1, "ack": 0, "flags": "R", "t_ms": 1.5}]

    monkeypatch.setattr(forge_rst, "exchange", fake_exchange)
    ctx = with_connections(FakeContext(), 50000, 50001)
    fault = build("forge_rst", {"toward": "client", "connection": 1}, step="rst")

    class Closing(Sender):
        def close(self) -> None:
            """Nothing to close."""

    async def run(fn: Any, *args: object) -> Any:
        ctx.lab.ns("router").calls.append((fn, args))
        return Closing()

    monkeypatch.setattr(ctx.lab.ns("router"), "run", run)
    details = asyncio.run(fault.apply(ctx))
    assert details == {"toward": "client", "connection": 1, "client_port": 50000,
                       "sent": [{"to": "client", "seq": 1, "ack": 0, "flags": "R", "t_ms": 1.5}],
                       "rst_after_ms": 1.5}
    assert [(fn.__name__, args) for fn, args in ctx.lab.ns("router").calls] == [
        ("open_listener", ("c0",)), ("open_sender", ())]
    assert seen[0].flow == FLOW and seen[0].targets == ("client",)
    assert fault.reversible is False and fault.lasts_s == 0.0


def test_an_unseen_connection_fails_and_touches_nothing() -> None:
    """A connection the capture has not seen is a mechanism failure; nothing runs at the router."""
    ctx = FakeContext()
    with pytest.raises(MechanismError, match="no TCP connection 'latest'"):
        asyncio.run(build("forge_rst").apply(ctx))
    assert ctx.lab.ns("router").calls == []


def test_with_the_proxy_only_the_client_can_be_reset() -> None:
    """Behind the proxy the server's connection is the proxy's: validate refuses toward server
    (and both) with the reason, and accepts toward client."""
    proxy_step = [{"id": "fz", "do": {"fault": "freeze"}}]
    for toward in ("server", "both"):
        with pytest.raises(ProfileError, match="forge_rst toward the server cannot cross the proxy"):
            validate("forge_rst", {"toward": toward}, before=proxy_step)
    assert validate("forge_rst", {"toward": "client"}, before=proxy_step).needs == {"proxy", "mic"}
    assert validate("forge_rst", {"toward": "both"}, mic=False).needs == frozenset()
