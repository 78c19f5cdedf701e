"""`faultlab pcap server`: what the server did on each connection of a capture, in the terms of
the field study (docs/live-server-behaviour.md, items L6-L8 and R1), read off `faultlab pcap
inspect`'s flow walk and frames.

The rules, per connection (data means new payload: not a retransmission, not a keepalive):

- last data: which end sent the last new payload, and when;
- the server's longest silence: the longest time between two server packets with new data, or
  from its last one to the end of the connection (its last packet once it ended with a RST or a
  FIN each way, else the end of the capture): L6 saw 479 s on a healthy idle connection;
- pings and keepalives: WebSocket ping frames from the server (readable on plain ws://, or in
  TLS that was decrypted), and TCP keepalives (a segment one byte behind its sequence): L6 saw none;
- its close: the server's first close frame, with how long the client had sent no packet, and
  no data, before it: L7's idle reaping is 1011 about 480 s after the client went silent;
- gave up: the server sent a RST (its first one); or its last packets were retransmissions that
  the client never answered (no client packet after the first of them), it sent nothing after
  the last of them, and the capture went on past when the next one was due (twice the last gap
  between two of them, since the backoff doubles; `TCP_RTO_MAX`, 120 s, after a single one): its
  TCP gave up after that one (Linux drops the connection one timeout later, which no capture
  shows). A capture that ends sooner shows a server still retransmitting. L8: RTO doubling from
  ~0.21 s to 30 s, 11 retransmissions, ~115 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from faultlab.capture.flows import DOWN, Flow, PcapReport
from faultlab.capture.flows_text import tls_state
from faultlab.capture.websocket import WsFrame

# Linux's TCP_RTO_MAX: no retransmission waits longer after the one before.
RTO_MAX_S = 120.0


@dataclass(frozen=True)
class GaveUp:
    """When the server's TCP gave up on a connection: by a RST, or after the last of
    `retransmissions` unanswered retransmissions sent from `first_ts` (unix times)."""

    ts: float
    how: str
    retransmissions: int = 0
    first_ts: float | None = None


@dataclass(frozen=True)
class ServerConnection:
    """One connection as the server behaved on it (unix times)."""

    flow: Flow
    end_ts: float
    ended: bool
    silence_s: float
    silence_from_ts: float | None
    silence_to_end: bool
    pings: list[float]
    close: WsFrame | None
    client_close: WsFrame | None
    gave_up: GaveUp | None
    still_retransmitting: bool

    @classmethod
    def of(cls, flow: Flow, capture_end: float) -> ServerConnection:
        up, down = flow.up, flow.down
        ended = bool(up.rst or down.rst or (up.fin and down.fin))
        end = max(t for t in (up.last_ts, down.last_ts) if t is not None) if ended else capture_end
        since: float | None
        if down.last_data_ts is None:
            since = min(t for t in (up.first_ts, down.first_ts) if t is not None)
            silence, to_end = end - since, True
        elif end - down.last_data_ts >= down.longest_data_gap_s:
            silence, since, to_end = end - down.last_data_ts, down.last_data_ts, True
        else:
            silence, since, to_end = down.longest_data_gap_s, down.longest_data_gap_from_ts, False
        server_frames = [f for label, f in flow.frames if label == DOWN]
        return cls(flow, end, ended, silence, since, to_end,
                   [f.ts for f in server_frames if f.opcode == "ping"],
                   next((f for f in server_frames if f.opcode == "close"), None),
                   next((f for label, f in flow.frames if label != DOWN and f.opcode == "close"),
                        None),
                   *tcp_ending(flow, capture_end))

    @property
    def answered_close(self) -> WsFrame | None:
        """The client's close frame that the server's close answered (it came first), if any."""
        if self.close is None or self.client_close is None or self.client_close.ts > self.close.ts:
            return None
        return self.client_close

    @property
    def last_data(self) -> tuple[str, float] | None:
        """Which end sent the last new data ("client" or "server"), and when."""
        up, down = self.flow.up.last_data_ts, self.flow.down.last_data_ts
        if up is None and down is None:
            return None
        if down is None or (up is not None and up > down):
            assert up is not None
            return "client", up
        return "server", down


def tcp_ending(flow: Flow, capture_end: float) -> tuple[GaveUp | None, bool]:
    """When the server's TCP gave up on `flow`, by the module's rule (or None); and whether it
    was still retransmitting when the capture ended, before its next retransmission was due
    (whether it would give up is then not in the capture)."""
    down = flow.down
    if down.first_rst_ts is not None:
        return GaveUp(down.first_rst_ts, "reset"), False
    last = down.last_retransmission_ts
    if not down.unanswered_retransmissions or last is None or down.last_ts != last:
        return None, False
    next_due = RTO_MAX_S if down.retransmission_gap_s is None else 2 * down.retransmission_gap_s
    if capture_end - last <= next_due:
        return None, True
    return GaveUp(last, "retransmissions", down.unanswered_retransmissions,
                  down.unanswered_from_ts), False


@dataclass(frozen=True)
class ServerReport:
    """The server's behaviour on every connection of one capture."""

    capture: PcapReport
    connections: list[ServerConnection]

    @classmethod
    def of(cls, capture: PcapReport) -> ServerReport:
        return cls(capture, [ServerConnection.of(f, capture.last_ts) for f in capture.flows])

    def moment(self, ts: float | None) -> dict[str, Any] | None:
        """A time as seconds since the capture's start and as a clock time (local, ISO 8601)."""
        if ts is None:
            return None
        return {"t": self.capture.rel(ts),
                "clock": datetime.fromtimestamp(ts).astimezone().isoformat(timespec="milliseconds")}

    def to_dict(self) -> dict[str, Any]:
        cap = self.capture
        return {
            "file": str(cap.path), "packets": cap.packets,
            "start": self.moment(cap.first_ts) if cap.packets else None,
            "duration_s": round(cap.last_ts - cap.first_ts, 6),
            "keylogs": [str(p) for p in cap.keylogs], "notes": cap.notes,
            "connections": [self._connection(c) for c in self.connections],
        }

    def _connection(self, c: ServerConnection) -> dict[str, Any]:
        f, m = c.flow, self.moment
        last = c.last_data
        close = None
        if c.close is not None:
            peer, peer_data = c.close.peer_last_ts, c.close.peer_last_data_ts
            answered = c.answered_close
            close = {
                "code": c.close.close_code, "reason": c.close.close_reason, "at": m(c.close.ts),
                "answers_client_close": None if answered is None else {
                    "code": answered.close_code, "reason": answered.close_reason,
                    "at": m(answered.ts)},
                "client_last_packet": m(peer), "client_last_data": m(peer_data),
                "client_silent_s": None if peer is None else round(c.close.ts - peer, 6),
                "client_data_silent_s": (None if peer_data is None
                                         else round(c.close.ts - peer_data, 6)),
            }
        gave = c.gave_up
        return {
            "client": f"{f.client}:{f.client_port}", "server": f"{f.server}:{f.server_port}",
            "tls": f.tls, "decrypted": f.decrypted, "frames_visible": f.frames_visible,
            "ended": c.ended, "end": m(c.end_ts),
            "last_data": None if last is None else {"by": last[0], **(m(last[1]) or {})},
            "server_silence": {"longest_s": round(c.silence_s, 6), "from": m(c.silence_from_ts),
                               "to_end": c.silence_to_end},
            "server_pings": ({"count": len(c.pings), "first": m(c.pings[0] if c.pings else None)}
                             if f.frames_visible else None),
            "server_keepalives": {"count": f.down.keepalives, "first": m(f.down.first_keepalive_ts)},
            "server_close": close if f.frames_visible else None,
            "server_retransmissions": {"count": f.down.retransmissions,
                                       "last": m(f.down.last_retransmission_ts)},
            "server_gave_up": None if gave is None else {
                "how": gave.how, "at": m(gave.ts), "retransmissions": gave.retransmissions,
                "first": m(gave.first_ts)},
            "server_retransmitting_at_end": c.still_retransmitting,
        }

    def render_text(self) -> str:
        data = self.to_dict()
        start = data["start"]
        lines = [f"{data['file']}: {len(data['connections'])} connection(s) over "
                 f"{data['duration_s']:.3f} s" + (f", from {_clock(start, date=True)}" if start
                                                  else "")]
        if data["keylogs"]:
            lines.append("key logs: " + ", ".join(data["keylogs"]))
        lines += data["notes"]
        for i, c in enumerate(data["connections"], 1):
            lines += ["", f"connection {i}: {c['client']} -> {c['server']}{tls_state(c)}"]
            lines += [f"  {label:<17}{text}" for label, text in _rows(c)]
        return "\n".join(lines)


def _clock(moment: dict[str, Any], date: bool = False) -> str:
    stamp = datetime.fromisoformat(moment["clock"])
    return stamp.isoformat(" ", "milliseconds") if date else stamp.strftime("%H:%M:%S.%f")[:-3]


def _tally(count: int, which: str, moment: dict[str, Any] | None, none: str = "none") -> str:
    """`3, the first at t=...`, or `none` when there were none."""
    return f"{count}, the {which} at {_at(moment)}" if count else none


def _at(moment: dict[str, Any] | None) -> str:
    return "-" if moment is None else f"t={moment['t']:.3f} s ({_clock(moment)})"


def _rows(c: dict[str, Any]) -> list[tuple[str, str]]:
    last, silence = c["last_data"], c["server_silence"]
    until = "the end of the connection" if c["ended"] else "the end of the capture"
    rows = [("last data", "none" if last is None else f"{last['by']}, at {_at(last)}"),
            ("server silence", f"{silence['longest_s']:.3f} s from {_at(silence['from'])}"
                               + (f" to {until}" if silence["to_end"] else ""))]
    unseen = "unknown: " + ("TLS not decrypted" if c["tls"] else "no WebSocket seen")
    pings = c["server_pings"]
    rows.append(("WebSocket pings", unseen if pings is None else
                 _tally(pings["count"], "first", pings["first"])))
    keep = c["server_keepalives"]
    rows.append(("TCP keepalives", _tally(keep["count"], "first", keep["first"])))
    close = c["server_close"]
    if close is None:
        rows.append(("server close", unseen if not c["frames_visible"] else "none"))
    else:
        text = f"{close['code']} {close['reason']!r} at {_at(close['at'])}"
        if answered := close["answers_client_close"]:
            text += f", answering the client's close {answered['code']}"
        rows.append(("server close", text))
        if close["client_silent_s"] is not None:
            rows.append(("client silent", f"{close['client_silent_s']:.3f} s before it (its last "
                         f"packet at {_at(close['client_last_packet'])})"))
        if close["client_data_silent_s"] is not None:
            rows.append(("", f"{close['client_data_silent_s']:.3f} s since its last data "
                         f"(at {_at(close['client_last_data'])})"))
    retrans = c["server_retransmissions"]
    rows.append(("retransmissions", _tally(retrans["count"], "last", retrans["last"], "0")))
    gave = c["server_gave_up"]
    if gave is None:
        rows.append(("TCP gave up", "not yet: still retransmitting when the capture ended"
                     if c["server_retransmitting_at_end"] else "no"))
    elif gave["how"] == "reset":
        rows.append(("TCP gave up", f"reset (RST) at {_at(gave['at'])}"))
    else:
        rows.append(("TCP gave up", f"after its last retransmission at {_at(gave['at'])}: "
                     f"{gave['retransmissions']} unanswered since {_at(gave['first'])}"))
    return rows
