"""`faultlab pcap inspect`: per TCP flow, what each direction carried and where it went silent."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultlab.capture.pcap import FIN, RST, SYN, Segment, read_segments
from faultlab.capture.websocket import WsFrame, WsStreamDecoder

_HALF = 1 << 31
_MASK = 0xFFFFFFFF


def _after(a: int, b: int) -> bool:
    """Sequence number `a` is after `b`, modulo 2**32."""
    return a != b and ((a - b) & _MASK) < _HALF


@dataclass
class Direction:
    """One direction of a flow."""

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
    _next_seq: int | None = field(default=None, repr=False)
    _pending: dict[int, tuple[float, bytes]] = field(default_factory=dict, repr=False)
    _ws: WsStreamDecoder = field(default_factory=WsStreamDecoder, repr=False)
    _stream_seq: int | None = field(default=None, repr=False)

    def add(self, seg: Segment, frames: list[tuple[str, WsFrame]], label: str) -> None:
        if self.last_ts is not None:
            self._note_gap(self.last_ts, seg.ts)
        elif self.first_ts is None:
            self.first_ts = seg.ts
        self.last_ts = seg.ts
        self.packets += 1
        n = len(seg.payload)
        self.payload_bytes += n
        if seg.flags & FIN:
            self.fin += 1
        if seg.flags & RST:
            self.rst += 1
            return
        seq_len = n + (1 if seg.flags & (SYN | FIN) else 0)
        end = (seg.seq + seq_len) & _MASK
        if self._next_seq is None:
            self._next_seq = end
        elif n <= 1 and not seg.flags & (SYN | FIN) and seg.seq == (self._next_seq - 1) & _MASK:
            self.keepalives += 1
            return
        elif seq_len and not _after(end, self._next_seq):
            self.retransmissions += 1
        elif _after(end, self._next_seq):
            self._next_seq = end
        if seg.flags & SYN:
            self._stream_seq = (seg.seq + 1) & _MASK
        if n:
            self._reassemble(seg, frames, label)

    def _note_gap(self, start: float, end: float) -> None:
        if end - start > self.longest_silence_s:
            self.longest_silence_s = end - start
            self.longest_silence_from_ts = start

    def _reassemble(self, seg: Segment, frames: list[tuple[str, WsFrame]], label: str) -> None:
        if not self._ws.active:
            return
        if self._stream_seq is None:  # the capture began mid-stream
            self._stream_seq = seg.seq
        self._pending.setdefault(seg.seq, (seg.ts, seg.payload))
        while self._pending:
            # Take the segment that covers the next expected byte, trimming any overlap.
            hit = next((s for s in self._pending
                        if not _after(s, self._stream_seq)
                        and _after((s + len(self._pending[s][1])) & _MASK, self._stream_seq)),
                       None)
            if hit is None:
                stale = [s for s in self._pending if not _after(s, self._stream_seq)]
                for s in stale:
                    del self._pending[s]
                break
            ts, data = self._pending.pop(hit)
            data = data[(self._stream_seq - hit) & _MASK :]
            self._stream_seq = (self._stream_seq + len(data)) & _MASK
            frames.extend((label, f) for f in self._ws.feed(ts, data))
        if len(self._pending) > 4096:  # a hole that never fills: stop decoding this direction
            self._pending.clear()
            self._ws.active = False

    def finish(self, capture_end: float) -> None:
        if self.last_ts is not None:
            self._note_gap(self.last_ts, capture_end)


@dataclass
class Flow:
    """A TCP connection: the end that opened it is the client."""

    client: str
    client_port: int
    server: str
    server_port: int
    up: Direction = field(default_factory=Direction)
    down: Direction = field(default_factory=Direction)
    frames: list[tuple[str, WsFrame]] = field(default_factory=list)


@dataclass
class PcapReport:
    path: Path
    packets: int
    first_ts: float
    last_ts: float
    flows: list[Flow]

    def to_dict(self) -> dict[str, Any]:
        t0 = self.first_ts

        def rel(ts: float | None) -> float | None:
            return None if ts is None else round(ts - t0, 6)

        def direction(d: Direction) -> dict[str, Any]:
            return {
                "packets": d.packets, "payload_bytes": d.payload_bytes, "fin": d.fin,
                "rst": d.rst, "retransmissions": d.retransmissions, "keepalives": d.keepalives,
                "first_t": rel(d.first_ts), "last_t": rel(d.last_ts),
                "longest_silence_s": round(d.longest_silence_s, 6),
                "longest_silence_from_t": rel(d.longest_silence_from_ts),
            }

        return {
            "file": str(self.path), "packets": self.packets,
            "duration_s": round(self.last_ts - self.first_ts, 6),
            "flows": [{
                "client": f"{f.client}:{f.client_port}", "server": f"{f.server}:{f.server_port}",
                "client_to_server": direction(f.up), "server_to_client": direction(f.down),
                "websocket_frames": [
                    {"direction": label, **{k: v for k, v in asdict(fr).items() if k != "ts"},
                     "t": rel(fr.ts)} for label, fr in f.frames],
            } for f in self.flows],
        }


def analyse(path: Path) -> PcapReport:
    """Read a capture once and summarise every TCP flow in it."""
    flows: dict[tuple[str, int, str, int], tuple[Flow, bool]] = {}
    ordered: list[Flow] = []
    packets, first, last = 0, None, 0.0
    for seg in read_segments(path):
        packets += 1
        if first is None:
            first = seg.ts
        last = seg.ts
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        entry = flows.get(key)
        if entry is None:
            # The first packet seen names the client, unless it is the answer to a SYN.
            from_server = bool(seg.flags & SYN) and bool(seg.flags & 0x10)
            flow = (Flow(seg.dst, seg.dport, seg.src, seg.sport) if from_server
                    else Flow(seg.src, seg.sport, seg.dst, seg.dport))
            flows[key] = (flow, not from_server)
            flows[(seg.dst, seg.dport, seg.src, seg.sport)] = (flow, from_server)
            ordered.append(flow)
            entry = flows[key]
        flow, upward = entry
        if upward:
            flow.up.add(seg, flow.frames, "client->server")
        else:
            flow.down.add(seg, flow.frames, "server->client")
    for flow in ordered:
        flow.up.finish(last)
        flow.down.finish(last)
    return PcapReport(path, packets, first if first is not None else 0.0, last, ordered)


def render_text(report: PcapReport) -> str:
    data = report.to_dict()
    lines = [f"{data['file']}: {data['packets']} TCP packets over {data['duration_s']:.3f} s, "
             f"{len(data['flows'])} flow(s)"]
    for i, flow in enumerate(data["flows"], 1):
        lines += ["", f"flow {i}: {flow['client']} -> {flow['server']}",
                  f"  {'direction':<16}{'packets':>8}{'bytes':>10}{'FIN':>5}{'RST':>5}"
                  f"{'retrans':>9}{'keepalive':>10}  longest silence"]
        for name in ("client_to_server", "server_to_client"):
            d = flow[name]
            since = d["longest_silence_from_t"]
            silence = (f"{d['longest_silence_s']:.3f} s from t={since:.3f}" if since is not None
                       else "-")
            lines.append(f"  {name.replace('_to_', '->'):<16}{d['packets']:>8}"
                         f"{d['payload_bytes']:>10}{d['fin']:>5}{d['rst']:>5}"
                         f"{d['retransmissions']:>9}{d['keepalives']:>10}  {silence}")
        frames = flow["websocket_frames"]
        if frames:
            lines.append(f"  WebSocket frames: {len(frames)}")
            for fr in frames:
                close = (f"  code={fr['close_code']} reason={fr['close_reason']!r}"
                         if fr["opcode"] == "close" else "")
                close += f"  kind={fr['kind']}" if fr.get("kind") else ""
                lines.append(f"    t={fr['t']:.6f}  {fr['direction']:<15} {fr['opcode']:<12}"
                             f" len={fr['length']}{close}")
    return "\n".join(lines)
