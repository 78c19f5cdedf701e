"""`faultlab pcap inspect`: per TCP flow, what each direction carried and where it went silent.

One walk over the capture (`analyse`) gives every flow's statistics and WebSocket frames: plain
`ws://` frames from the hand decoder, frames inside TLS from tshark's dissection merged in by
packet number; `flows_text` prints it, `faultlab pcap server` reads its report off the same walk,
and with `payloads` a cassette its messages (`faultlab.cassette.pcap`).

The walk is Python's work per packet, so its hot path (`Direction.add`, `Flow.add`, the decoders)
is written for speed. On the benchmark's 100,000-packet ws:// capture (bench/ws_capture_bench.py) it takes
about 2 s: per packet some 5 us to decode it, 5 us for the statistics, the reassembly and the
frame, and 7 us to name the frame's kind (a JSON parse). It took 4 s, 1.8 times as fast as the
same walk over dpkt's parsing where the goal is 2x; now 2.3x to 3.0x (eleven runs on two cores,
the spread the machine's).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultlab.capture.pcap import FIN, RST, SYN, Segment, numbered_segments
from faultlab.capture.tshark import TlsMessages
from faultlab.capture.websocket import HttpHead, WsFrame, WsStreamDecoder

if TYPE_CHECKING:
    from faultlab.capture.tshark import DecryptedPacket

_HALF = 1 << 31
_MASK = 0xFFFFFFFF
_WRAP = 1 << 32
_NO_FRAMES: list[WsFrame] = []  # returned, never filled

# What one direction may hold behind a hole in its stream before its decoding stops (and the
# inspector says so): a hole that never fills must not keep a hostile flow's data forever.
# 16 MiB is above any receive window a default Linux kernel offers (tcp_rmem max 6 MiB).
MAX_PENDING_BYTES = 16 << 20
# Segments of a few bytes cost more in bookkeeping than in payload: about 220 bytes each beyond
# the payload, measured with tracemalloc, so 65,536 of them weigh another 14 MB.
MAX_PENDING_SEGMENTS = 65536


def _after(a: int, b: int) -> bool:
    """Sequence number `a` is after `b`, modulo 2**32."""
    return a != b and ((a - b) & _MASK) < _HALF


def _unwrap(seq: int, near: int) -> int:
    """The unwrapped sequence number that `seq` (modulo 2**32) names within 2**31 of `near`:
    after `near` exactly when `_after(seq, near)`."""
    d = (seq - near) & _MASK
    return near + d - (1 << 32) if d >= _HALF else near + d


@dataclass(frozen=True)
class Abandoned:
    """A direction whose WebSocket decoding stopped at `ts` (unix time) because this much waited
    behind a hole in its stream; its later frames are not listed."""

    ts: float
    pending_bytes: int
    pending_segments: int


@dataclass(slots=True)
class Direction:
    """One direction of a flow; times are unix seconds.

    New data is payload beyond what the direction had sent before (retransmissions and keepalives
    are not). `unanswered_retransmissions` counts the retransmissions sent since the other end's
    last packet, from `unanswered_from_ts`: a run the peer never answered.
    """

    packets: int = 0
    payload_bytes: int = 0
    fin: int = 0
    rst: int = 0
    retransmissions: int = 0
    keepalives: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    longest_silence_s: float = 0.0
    longest_silence_from_ts: float | None = None
    abandoned: Abandoned | None = None
    first_rst_ts: float | None = None
    first_keepalive_ts: float | None = None
    last_retransmission_ts: float | None = None
    # The time between the last two retransmissions: TCP's backoff at least doubles it, so the
    # next one is due no sooner than twice this after the last.
    retransmission_gap_s: float | None = None
    unanswered_retransmissions: int = 0
    unanswered_from_ts: float | None = None
    last_data_ts: float | None = None
    longest_data_gap_s: float = 0.0
    longest_data_gap_from_ts: float | None = None
    # With payloads: the hand decoder keeps the handshake and each message; inside TLS they come
    # from tshark, dealt to this direction's messages by `_tls_messages`.
    payloads: bool = field(default=False, repr=False)
    _tls_head: HttpHead | None = field(default=None, repr=False)
    _tls_messages: TlsMessages | None = field(default=None, repr=False)
    _next_seq: int | None = field(default=None, repr=False)
    _ws: WsStreamDecoder = field(init=False, repr=False)
    # Reassembly, in unwrapped sequence numbers: the next byte the decoder wants, and the segments
    # not yet used, by where they start (start -> arrival number, ts, payload), with those starts
    # in a heap so a hole that fills releases what waited behind it in order. (Rescanning every
    # waiting segment for each new one made 4,000 segments behind a hole take 2 to 13 s: issue 17.)
    _stream_pos: int | None = field(default=None, repr=False)
    _pending: dict[int, tuple[int, float, bytes]] = field(default_factory=dict, repr=False)
    _starts: list[int] = field(default_factory=list, repr=False)
    _pending_bytes: int = field(default=0, repr=False)
    _arrivals: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self._ws = WsStreamDecoder(self.payloads)

    def add(self, seg: Segment) -> list[WsFrame]:
        """One segment of this direction; the WebSocket frames it completed (not to be kept:
        it may be shared)."""
        # The helpers (gaps, sequence arithmetic) are written out: this runs once a packet.
        ts = seg.ts
        last = self.last_ts
        if last is not None:
            if ts - last > self.longest_silence_s:
                self.longest_silence_s = ts - last
                self.longest_silence_from_ts = last
        elif self.first_ts is None:
            self.first_ts = ts
        self.last_ts = ts
        self.packets += 1
        n = len(seg.payload)
        self.payload_bytes += n
        flags = seg.flags
        if flags & FIN:
            self.fin += 1
        if flags & RST:
            self.rst += 1
            if self.first_rst_ts is None:
                self.first_rst_ts = ts
            return _NO_FRAMES
        syn_fin = flags & (SYN | FIN)
        seq_len = n + 1 if syn_fin else n
        end = (seg.seq + seq_len) & _MASK
        next_seq = self._next_seq
        fresh = False
        if next_seq is None:
            self._next_seq = end
            fresh = True
        elif n <= 1 and not syn_fin and seg.seq == (next_seq - 1) & _MASK:
            self.keepalives += 1
            if self.first_keepalive_ts is None:
                self.first_keepalive_ts = ts
            return _NO_FRAMES
        elif end != next_seq and (end - next_seq) & _MASK < _HALF:  # _after(end, next_seq)
            self._next_seq = end
            fresh = True
        elif seq_len:
            self.retransmissions += 1
            if self.last_retransmission_ts is not None:
                self.retransmission_gap_s = ts - self.last_retransmission_ts
            self.last_retransmission_ts = ts
            self.unanswered_retransmissions += 1
            if self.unanswered_retransmissions == 1:
                self.unanswered_from_ts = ts
        if n and fresh:
            last_data = self.last_data_ts
            if last_data is not None and ts - last_data > self.longest_data_gap_s:
                self.longest_data_gap_s = ts - last_data
                self.longest_data_gap_from_ts = last_data
            self.last_data_ts = ts
        if flags & SYN:
            isn = (seg.seq + 1) & _MASK
            self._stream_pos = isn if self._stream_pos is None else _unwrap(isn, self._stream_pos)
        if n and self._ws.active:
            pos = self._stream_pos
            if pos is not None and not (seg.seq - pos) & _MASK and not self._pending:
                # The next bytes, with nothing waiting: most segments of a capture, fed here
                # without the heaps (a third of a 100,000-packet walk went to them).
                self._stream_pos = pos + n
                return self._ws.feed(ts, seg.payload)
            return self._reassemble(seg)
        return _NO_FRAMES

    def _note_gap(self, start: float, end: float) -> None:
        if end - start > self.longest_silence_s:
            self.longest_silence_s = end - start
            self.longest_silence_from_ts = start

    def answered(self) -> None:
        """The other end sent a packet: the retransmissions so far did not go unanswered."""
        self.unanswered_retransmissions = 0
        self.unanswered_from_ts = None

    @property
    def tls(self) -> bool:
        """The stream opened with a TLS handshake record."""
        return self._ws.tls

    @property
    def upgraded(self) -> bool:
        """The hand decoder saw this plain stream's WebSocket Upgrade."""
        return self._ws.upgraded

    @property
    def handshake(self) -> HttpHead | None:
        """With payloads: this direction's half of the WebSocket's opening handshake (the
        client's Upgrade request, the server's answer), plain or inside TLS."""
        return self._ws.handshake or self._tls_head

    def from_tshark(self, ts: float, row: DecryptedPacket) -> list[WsFrame]:
        """The frames tshark completed inside TLS in this direction's packet at `ts`, stamped with
        its time; with payloads, the packet's handshake half is kept and its messages dealt out."""
        frames = [replace(f, ts=ts) for f in row.frames]
        if self.payloads:
            if row.head is not None:
                self._tls_head = replace(row.head, ts=ts)
            if frames:
                if self._tls_messages is None:
                    self._tls_messages = TlsMessages()
                frames = self._tls_messages.deal(frames, row)
        return frames

    def _reassemble(self, seg: Segment) -> list[WsFrame]:
        pos = self._stream_pos
        if pos is None:  # the capture began mid-stream
            pos = self._stream_pos = seg.seq
        d = (seg.seq - pos) & _MASK
        start = pos + d - _WRAP if d >= _HALF else pos + d
        frames: list[WsFrame] = []
        if start not in self._pending:  # a copy of a waiting segment's start: the first one stays
            self._pending[start] = (self._arrivals, seg.ts, seg.payload)
            self._arrivals += 1
            self._pending_bytes += len(seg.payload)
            heapq.heappush(self._starts, start)
        reached: list[tuple[int, int]] = []  # (arrival, start): waiting no more for earlier bytes
        while True:
            while self._starts and self._starts[0] <= pos:
                s = heapq.heappop(self._starts)
                heapq.heappush(reached, (self._pending[s][0], s))
            if not reached:
                break
            # Of the segments that cover the next byte wanted, the first to arrive is used, as the
            # inspector always did (it decides a frame's time, and the bytes when copies disagree),
            # trimmed to what is new; one that ends before that byte is an old copy and is dropped.
            s = heapq.heappop(reached)[1]
            _, ts, data = self._pending.pop(s)
            self._pending_bytes -= len(data)
            data = data[pos - s :]
            if data:
                pos += len(data)
                self._stream_pos = pos
                frames += self._ws.feed(ts, data)
        if not self._ws.active:  # not a WebSocket stream after all: nothing left to reassemble
            self._drop_pending()
        elif self._pending_bytes > MAX_PENDING_BYTES or len(self._pending) > MAX_PENDING_SEGMENTS:
            self.abandoned = Abandoned(seg.ts, self._pending_bytes, len(self._pending))
            self._drop_pending()
            self._ws.active = False
        return frames

    def _drop_pending(self) -> None:
        self._pending.clear()
        self._starts.clear()
        self._pending_bytes = 0

    def finish(self, capture_end: float) -> None:
        if self.last_ts is not None:
            self._note_gap(self.last_ts, capture_end)

    @property
    def unread_bytes(self) -> int:
        """Bytes of the stream still waiting behind a hole that never filled (a segment the
        capture lost): the frames in them, and after the hole, were never read."""
        return self._pending_bytes


UP, DOWN = "client->server", "server->client"


@dataclass(slots=True)
class Flow:
    """A TCP connection: the end that opened it is the client. `decrypted` says whether tshark
    decrypted its TLS handshake (None when no key log was used); with `payloads`, its frames
    carry their messages and its directions their handshake halves."""

    client: str
    client_port: int
    server: str
    server_port: int
    up: Direction = field(default_factory=Direction)
    down: Direction = field(default_factory=Direction)
    frames: list[tuple[str, WsFrame]] = field(default_factory=list)
    decrypted: bool | None = None

    @classmethod
    def opened(cls, client: str, client_port: int, server: str, server_port: int,
               payloads: bool) -> Flow:
        """A flow first seen now, its directions decoding payloads or not."""
        return cls(client, client_port, server, server_port, Direction(payloads=payloads),
                   Direction(payloads=payloads))

    @property
    def tls(self) -> bool:
        """Either end opened its stream with a TLS handshake record."""
        return self.up.tls or self.down.tls

    @property
    def frames_visible(self) -> bool:
        """Its WebSocket frames could be read: a plain Upgrade, or TLS that tshark decrypted."""
        return bool(self.decrypted) or self.up.upgraded or self.down.upgraded

    def add(self, seg: Segment, upward: bool, decrypted: DecryptedPacket | None = None) -> None:
        """One segment of this flow, with what tshark found in it (inside TLS)."""
        if upward:
            mine, peer, label = self.up, self.down, UP
        else:
            mine, peer, label = self.down, self.up, DOWN
        completed = mine.add(seg)
        if peer.unanswered_retransmissions:
            peer.answered()
        if decrypted is not None:
            completed = completed + mine.from_tshark(seg.ts, decrypted)
        if completed:
            frames = self.frames
            for frame in completed:
                if frame.opcode == "close":
                    frame = replace(frame, peer_last_ts=peer.last_ts,
                                    peer_last_data_ts=peer.last_data_ts)
                frames.append((label, frame))


_ABSOLUTE = ("ts", "peer_last_ts", "peer_last_data_ts")
_NOT_LISTED = (*_ABSOLUTE, "message")  # a report lists frames, not what they carry


@dataclass
class PcapReport:
    """A capture's flows; `notes` are lines a reader needs to trust the frames listed (tshark
    missing, key logs that decrypted nothing), and `keylogs` the key logs used."""

    path: Path
    packets: int
    first_ts: float
    last_ts: float
    flows: list[Flow]
    notes: list[str] = field(default_factory=list)
    keylogs: list[Path] = field(default_factory=list)

    def rel(self, ts: float | None) -> float | None:
        """A unix time as seconds since the capture's first packet."""
        return None if ts is None else round(ts - self.first_ts, 6)

    def to_dict(self) -> dict[str, Any]:
        rel = self.rel

        def direction(d: Direction) -> dict[str, Any]:
            return {
                "packets": d.packets, "payload_bytes": d.payload_bytes, "fin": d.fin,
                "rst": d.rst, "retransmissions": d.retransmissions, "keepalives": d.keepalives,
                "first_t": rel(d.first_ts), "last_t": rel(d.last_ts),
                "longest_silence_s": round(d.longest_silence_s, 6),
                "longest_silence_from_t": rel(d.longest_silence_from_ts),
                "websocket_abandoned": None if d.abandoned is None else {
                    "t": rel(d.abandoned.ts), "pending_bytes": d.abandoned.pending_bytes,
                    "pending_segments": d.abandoned.pending_segments,
                    "max_pending_bytes": MAX_PENDING_BYTES,
                    "max_pending_segments": MAX_PENDING_SEGMENTS},
                "last_data_t": rel(d.last_data_ts),
                "longest_data_gap_s": round(d.longest_data_gap_s, 6),
                "longest_data_gap_from_t": rel(d.longest_data_gap_from_ts),
                "last_retransmission_t": rel(d.last_retransmission_ts),
                "unanswered_retransmissions": d.unanswered_retransmissions,
            }

        def frame(label: str, fr: WsFrame) -> dict[str, Any]:
            out = {"direction": label,
                   **{k: v for k, v in asdict(fr).items() if k not in _NOT_LISTED},
                   "t": rel(fr.ts)}
            if fr.opcode == "close":
                out["peer_last_t"] = rel(fr.peer_last_ts)
                out["peer_last_data_t"] = rel(fr.peer_last_data_ts)
            return out

        return {
            "file": str(self.path), "packets": self.packets,
            "duration_s": round(self.last_ts - self.first_ts, 6),
            "keylogs": [str(p) for p in self.keylogs], "notes": self.notes,
            "flows": [{
                "client": f"{f.client}:{f.client_port}", "server": f"{f.server}:{f.server_port}",
                "tls": f.tls, "decrypted": f.decrypted,
                "client_to_server": direction(f.up), "server_to_client": direction(f.down),
                "websocket_frames": [frame(label, fr) for label, fr in f.frames],
            } for f in self.flows],
        }


def analyse(path: Path, decrypted: Iterable[DecryptedPacket] | None = None, *,
            payloads: bool = False) -> PcapReport:
    """Read a capture once and summarise every TCP flow in it; `decrypted` is tshark's view of the
    same file, in packet order (every flow's `decrypted` then says whether its TLS was). With
    `payloads`, frames carry their messages and flows their handshakes (and tshark's rows must
    have been asked for them: `tshark.dissect(payloads=True)`)."""
    flows: dict[tuple[str, int, str, int], tuple[Flow, bool]] = {}
    ordered: list[Flow] = []
    packets, first, last = 0, None, 0.0
    tshark = iter(decrypted) if decrypted is not None else iter(())
    row = next(tshark, None)
    for number, seg in numbered_segments(path):
        packets += 1
        if first is None:
            first = seg.ts
        last = seg.ts
        entry = flows.get((seg.src, seg.sport, seg.dst, seg.dport))
        if entry is None:
            entry = _first_packet(seg, flows, payloads)
            entry[0].decrypted = False if decrypted is not None else None
            ordered.append(entry[0])
        flow, upward = entry
        # tshark numbers every record; packets the walk skips (not TCP over IPv4) are passed over.
        while row is not None and row.number < number:
            row = next(tshark, None)
        if row is not None and row.number == number:
            if row.handshake_done:
                flow.decrypted = True
            flow.add(seg, upward, row)
        else:
            flow.add(seg, upward)
    for _ in tshark:  # tshark's rows past the last TCP packet: read to its end
        pass
    for flow in ordered:
        flow.up.finish(last)
        flow.down.finish(last)
    return PcapReport(path, packets, first if first is not None else 0.0, last, ordered)


def _first_packet(seg: Segment, flows: dict[tuple[str, int, str, int], tuple[Flow, bool]],
                  payloads: bool) -> tuple[Flow, bool]:
    """A new flow, entered both ways round: the first packet seen names the client, unless it is
    the answer to a SYN. Its entry for `seg`'s way: the flow, and whether `seg` goes upward."""
    from_server = bool(seg.flags & SYN) and bool(seg.flags & 0x10)
    flow = (Flow.opened(seg.dst, seg.dport, seg.src, seg.sport, payloads) if from_server
            else Flow.opened(seg.src, seg.sport, seg.dst, seg.dport, payloads))
    key = (seg.src, seg.sport, seg.dst, seg.dport)
    flows[key] = (flow, not from_server)
    flows[(seg.dst, seg.dport, seg.src, seg.sport)] = (flow, from_server)
    return flows[key]

