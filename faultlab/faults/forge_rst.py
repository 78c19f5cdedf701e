"""forge_rst: a box in the path injects a TCP reset with the flow's live sequence numbers (a
firewall or a carrier's DPI box tearing a connection down); applied once, nothing to undo.

Linux (RFC 5961) resets a connection only on a RST whose sequence number is exactly its
`rcv_nxt`; one elsewhere in the window gets a challenge ACK, one outside it is dropped. The
router learns `rcv_nxt` from the target end itself: the ACK number of its next segment (plus
whatever its peer sent since, which reaches it before the RST does). An end that says nothing
within PROBE_AFTER_S is probed with one byte far outside its window, which it answers at once
with a duplicate ACK (a data segment escapes the 500 ms rate limit of out-of-window ACKs); a
challenge ACK to a RST that raced a segment names the right number, and the RST is sent again.

The packets are packed by hand: importing scapy takes 0.46 s, longer than the whole exchange
(tests read them back with scapy).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from faultlab.capture.pcap import ACK, FIN, LINKTYPE_RAW, RST, SYN, Segment, decode_tcp
from faultlab.connections import ConnectionChoice
from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, register
from faultlab.faults.flows import FlowParams
from faultlab.interrupt import uncancelled

End = Literal["client", "server"]
Toward = Literal["both", "client", "server"]
ETH_P_IP = 0x0800
# A packet socket sees what its interface sends only when bound to every protocol.
ETH_P_ALL = 0x0003
SEQ_MASK = 0xFFFFFFFF
# An end silent this long after the step fired is probed (its peer's packets give no rcv_nxt).
PROBE_AFTER_S = 0.05
# After the last RST, how long a challenge ACK may take to come back: a lab's round trip is
# under 1 ms, and the step's `fault.applied` waits this long (a later challenge goes unanswered).
SETTLE_S = 0.01
# How long the flow may stay silent, probe included, before the fault fails.
WAIT_S = 3.0
# RSTs sent to one end at most (the first, then one per challenge ACK).
ATTEMPTS = 3


def seq_after(a: int, b: int) -> bool:
    """Sequence number `a` is later than `b` (modulo 2**32, RFC 793)."""
    return 0 < ((a - b) & SEQ_MASK) < 1 << 31


def seq_space(seg: Segment) -> int:
    """How much sequence space a segment takes: its payload, plus one for SYN and for FIN."""
    return len(seg.payload) + bool(seg.flags & SYN) + bool(seg.flags & FIN)


def other(end: End) -> End:
    return "server" if end == "client" else "client"


@dataclass(frozen=True)
class Flow:
    """One connection's two ends as the router's client link sees them."""

    client: str
    client_port: int
    server: str
    server_port: int

    def end(self, which: End) -> tuple[str, int]:
        return (self.client, self.client_port) if which == "client" else (self.server,
                                                                           self.server_port)

    def sender(self, seg: Segment) -> End | None:
        """Which end sent `seg`, or None when it is not of this flow."""
        ends: tuple[End, End] = ("client", "server")
        for which in ends:
            if (seg.src, seg.sport) == self.end(which) and (seg.dst, seg.dport) == self.end(
                    other(which)):
                return which
        return None


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def tcp_packet(src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
               payload: bytes = b"") -> bytes:
    """An IPv4 packet holding one TCP segment (window 0, no options), checksums filled in."""
    saddr, daddr = socket.inet_aton(src[0]), socket.inet_aton(dst[0])
    header = struct.pack("!HHIIBBHHH", src[1], dst[1], seq & SEQ_MASK, ack & SEQ_MASK, 5 << 4,
                         flags, 0, 0, 0)
    pseudo = saddr + daddr + struct.pack("!BBH", 0, socket.IPPROTO_TCP, 20 + len(payload))
    tcp = header[:16] + struct.pack("!H", _checksum(pseudo + header + payload)) + header[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64,
                     socket.IPPROTO_TCP, 0, saddr, daddr)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return ip + tcp + payload


@dataclass(frozen=True)
class Forged:
    """A packet the router sends: a RST (or a probe) to one end."""

    to: End
    seq: int
    ack: int
    flags: int
    payload: bytes = b""

    def packet(self, flow: Flow) -> bytes:
        return tcp_packet(flow.end(other(self.to)), flow.end(self.to), self.seq, self.ack,
                          self.flags, self.payload)


@dataclass
class Forger:
    """What the router has seen of the flow since the step fired and what it sends in answer:
    sans I/O, fed segments and the time (seconds since the step fired)."""

    flow: Flow
    targets: tuple[End, ...]
    # The sequence number after each end's latest segment.
    next_seq: dict[End, int] = field(default_factory=dict)
    # The RSTs sent to each end, their sequence numbers in order.
    sent: dict[End, list[int]] = field(default_factory=dict)
    # Per end that got a RST: the spans (first, after last) of its peer's segments since.
    peer_since_rst: dict[End, list[tuple[int, int]]] = field(default_factory=dict)
    probed: set[End] = field(default_factory=set)
    # The ends a RST not of ours reached (its sender's and its peer's connections are gone).
    closed: set[End] = field(default_factory=set)
    last_rst_at: float = -1.0
    # What we sent (the listener sees it go out to the client): (to, seq, flags).
    forged: set[tuple[End, int, int]] = field(default_factory=set)

    def see(self, seg: Segment, now: float) -> list[Forged]:
        """What to send on seeing `seg` (of any flow) at `now`."""
        end = self.flow.sender(seg)
        if end is None or (other(end), seg.seq, seg.flags) in self.forged:
            return []
        end_seq = (seg.seq + seq_space(seg)) & SEQ_MASK
        if end not in self.next_seq or seq_after(end_seq, self.next_seq[end]):
            self.next_seq[end] = end_seq
        if other(end) in self.peer_since_rst and end_seq != seg.seq:
            self.peer_since_rst[other(end)].append((seg.seq, end_seq))
        if seg.flags & RST:
            self.closed |= {end, other(end)}
            return []
        if end not in self.targets or not seg.flags & ACK:
            return []
        sent = self.sent.setdefault(end, [])
        if sent and (seg.ack == sent[-1] or len(sent) >= ATTEMPTS):
            return []  # it sent this before our RST arrived, or it will not be reset
        # Its ACK number is its rcv_nxt when it sent `seg` (exactly, for a challenge ACK); what
        # its peer sent meanwhile reaches it before the RST does.
        seq = seg.ack
        peer_next = self.next_seq.get(other(end))
        if not sent:
            if peer_next is not None and seq_after(peer_next, seq):
                seq = peer_next
        else:
            # A retry: only the peer's segments since the last RST that continue from the ACK
            # number move it on (what it sent before that the challenge does not count never
            # arrived). Measured: a tick of the server's between a RST and the client's
            # challenge made a retry at the challenge's number stale.
            for first, after in self.peer_since_rst.get(end, []):
                if not seq_after(first, seq) and seq_after(after, seq):
                    seq = after
        sent.append(seq)
        self.peer_since_rst[end] = []
        self.last_rst_at = now
        return [self._forge(Forged(end, seq, 0, RST))]

    def _forge(self, forged: Forged) -> Forged:
        self.forged.add((forged.to, forged.seq & SEQ_MASK, forged.flags))
        return forged

    def tick(self, now: float) -> list[Forged]:
        """Probes for the targets still silent at `now`."""
        if now < PROBE_AFTER_S:
            return []
        probes = []
        for end in self.targets:
            if end in self.sent or end in self.probed:
                continue
            self.probed.add(end)
            # Half the sequence space away from anything the peer sent is outside any window.
            peer_next = self.next_seq.get(other(end), random.getrandbits(32))
            probes.append(self._forge(Forged(end, (peer_next + (1 << 31)) & SEQ_MASK,
                                             self.next_seq.get(end, 0), ACK, b"\0")))
        return probes

    def done(self, now: float) -> bool:
        """Every target got its RST (or another's) and no challenge ACK came back meanwhile."""
        return (all(end in self.sent or end in self.closed for end in self.targets)
                and now - self.last_rst_at >= SETTLE_S)


def targets_of(toward: Toward) -> tuple[End, ...]:
    return ("client", "server") if toward == "both" else (toward,)


class ForgeRstParams(FlowParams):
    """`toward`: which end gets the reset; `connection`: which flow (the latest by default)."""

    toward: Toward = "both"
    """Which end gets a RST: `both`, `client` or `server` (with the proxy in the path, only
    `client`)."""
    connection: ConnectionChoice = "latest"
    """The connection to reset: `latest`, `first` or `k` (the k-th seen, from 1)."""


@register
class ForgeRst(Fault[ForgeRstParams]):
    """Reset one live flow with a RST bearing the sequence number each target end expects."""

    name: ClassVar[str] = "forge_rst"
    mechanism: ClassVar[str] = "a RST forged from the flow's live sequence numbers, sent from the router"
    layer: ClassVar[Layer] = "packet"
    Params = ForgeRstParams
    reversible: ClassVar[bool] = False

    @classmethod
    def proxy_problem(cls, params: FaultParams) -> str | None:
        assert isinstance(params, ForgeRstParams)
        if params.toward == "client":
            return None  # the client's leg crosses the client link, numbers and all
        return ("toward the server cannot cross the proxy: the server's connection is the "
                "proxy's own, which the router cannot tell from the client's (use toward: client, "
                "or abort with legs: server)")

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        fired = time.monotonic()
        p = self.params
        conn = ctx.connections.select(p.connection)
        if conn is None:
            raise MechanismError(
                f"no TCP connection {p.connection!r} from client to target has been seen yet")
        flow = Flow(conn.client, conn.client_port, conn.server, conn.server_port)
        router = ctx.lab.router
        # Sockets opened in the router's namespace stay there whichever thread uses them.
        listen = await router.run(open_listener, ctx.lab.client_link)
        try:
            send = await router.run(open_sender)
            try:
                forger = Forger(flow, targets_of(p.toward))
                stop = threading.Event()
                work = asyncio.ensure_future(
                    asyncio.to_thread(exchange, forger, listen, send, fired, stop))
                try:
                    log = await asyncio.shield(work)
                except asyncio.CancelledError:
                    # The run is ending: the thread stops within one read, before its sockets close.
                    stop.set()
                    with contextlib.suppress(Exception):
                        await uncancelled(work)
                    raise
            finally:
                send.close()
        finally:
            listen.close()
        rsts = [entry for entry in log if entry["flags"] == "R"]
        return {"toward": p.toward, "connection": conn.k, "client_port": conn.client_port,
                "sent": log, "rst_after_ms": rsts[0]["t_ms"] if rsts else None}

    async def revert(self, ctx: FaultContext) -> None:
        """Nothing to undo: a reset connection stays reset."""


def open_listener(iface: str) -> socket.socket:
    """A packet socket on `iface` that reads the packets it receives and sends (no link header)."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    sock.bind((iface, ETH_P_ALL))
    return sock


def open_sender() -> socket.socket:
    """A raw socket that sends whole IP packets, routed by the router (any source address)."""
    return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)


def exchange(forger: Forger, listen: socket.socket, send: socket.socket, fired: float,
             stop: threading.Event | None = None) -> list[dict[str, Any]]:
    """Watch the flow and send what `forger` says until it is done (or `stop` is set); what was
    sent, with the time after `fired` (ms) each packet left."""
    log: list[dict[str, Any]] = []

    def emit(packets: list[Forged]) -> None:
        for forged in packets:
            send.sendto(forged.packet(forger.flow), (forger.flow.end(forged.to)[0], 0))
            log.append({"to": forged.to, "seq": forged.seq, "ack": forged.ack,
                        "flags": "R" if forged.flags & RST else "A",
                        "t_ms": round((time.monotonic() - fired) * 1000, 3)})

    while True:
        now = time.monotonic() - fired
        if forger.done(now) or (stop is not None and stop.is_set()):
            return log
        if now > WAIT_S:
            if any(entry["flags"] == "R" for entry in log):
                return log
            raise MechanismError(f"the flow showed no sequence numbers within {WAIT_S:g} s "
                                 "(it is gone, or the path drops it)")
        emit(forger.tick(now))
        listen.settimeout(max(0.001, min(PROBE_AFTER_S, SETTLE_S) / 5))
        with contextlib.suppress(TimeoutError):
            data, (_, protocol, *_) = listen.recvfrom(65535)
            seg = decode_tcp(LINKTYPE_RAW, 0.0, data) if protocol == ETH_P_IP else None
            if seg is not None:
                emit(forger.see(seg, time.monotonic() - fired))
