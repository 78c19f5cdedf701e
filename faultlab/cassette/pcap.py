"""A tape from a packet capture (`faultlab cassette from-pcap`): the WebSocket conversations a
pcap holds, read in the flow walk `faultlab pcap inspect` makes (`faultlab.capture.flows`), asked
for payloads: plain ws:// from faultlab's own decoder, wss:// from tshark with the TLS key logs.

A connection is a WebSocket whose Upgrade request and 101 answer are both in the capture; they
are numbered from 1 in the order they opened (the 101's time). Each message is timed by the
packet that completed it, in the capture's unix seconds. Its close is the first close frame,
by whichever end sent it; a connection that ended without one (a reset, a FIN, the capture's
end) closes with no code and `by` None, when its last packet was seen (at the capture's end when
it never ended). The close comes after every message of its connection (an end may still send
until it answers the close), so its time is the later of the two.

A tape is the whole conversation or nothing: TLS that cannot be read, a stream with a hole the
capture never filled, or a message whose payload cannot be had (see `flows.analyse`) is a
`TapeSourceError`, never a tape with a connection or a message missing.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from faultlab.capture.flows import DOWN, UP, Flow, PcapReport
from faultlab.capture.source import CaptureInputError, locate, read_capture, tls_notes
from faultlab.capture.tshark import find_tshark
from faultlab.capture.websocket import HttpHead
from faultlab.cassette.tape import Closed, Message, Opened, Record, Side

DATA_OPCODES = ("text", "binary", "continuation")


class TapeSourceError(CaptureInputError):
    """The capture gives no tape: no WebSocket in it, TLS it cannot read, or a message whose
    payload cannot be had."""


def tape_from_pcap(capture: Path, keylogs: Sequence[Path] = ()) -> list[Record]:
    """The tape of the WebSocket conversations in `capture` (a pcap, or a run folder's
    capture.pcap with the run's key logs), inside TLS read with `keylogs`; the records in the
    order they happened, each connection's own in its order."""
    source = locate(capture, keylogs)
    tshark = find_tshark()
    report = read_capture(source, tshark, payloads=True)
    if problems := tls_notes(report, bool(source.keylogs), tshark is not None):
        raise TapeSourceError(f"no tape can be made of it: {problems[0]}")
    openings = sorted((opening for flow in report.flows if (opening := _Opening.of(flow))),
                      key=lambda opening: opening.answer.ts)
    if not openings:
        raise TapeSourceError("no WebSocket in this capture (no Upgrade request answered 101): "
                              "nothing to make a tape of")
    return list(heapq.merge(*(opening.records(conn, report)
                              for conn, opening in enumerate(openings, 1)),
                            key=lambda record: record.t))


@dataclass(frozen=True)
class _Opening:
    """A flow that opened a WebSocket: the label of its frames from the WebSocket's client (UP,
    unless the capture began without the TCP handshake and took the server for the client),
    the Upgrade request and the 101 answer."""

    flow: Flow
    client: str
    request: HttpHead
    answer: HttpHead

    @classmethod
    def of(cls, flow: Flow) -> _Opening | None:
        for mine, peer, client in ((flow.up, flow.down, UP), (flow.down, flow.up, DOWN)):
            request, answer = mine.handshake, peer.handshake
            if (request is not None and request.status is None and answer is not None
                    and answer.status == 101):
                return cls(flow, client, request, answer)
        return None

    def side(self, label: str) -> Side:
        return "client" if label == self.client else "server"

    def records(self, conn: int, report: PcapReport) -> list[Record]:
        """The connection's records: its opening, its messages, its close."""
        flow = self.flow
        for label, direction in ((UP, flow.up), (DOWN, flow.down)):
            if direction.abandoned is not None or direction.unread_bytes:
                raise TapeSourceError(
                    f"connection {conn} ({_endpoints(flow)}): the capture lost part of the "
                    f"{self.side(label)}'s stream (a segment it never saw), so the messages from "
                    "there on cannot be read")
        records: list[Record] = [Opened(self.answer.ts, conn, self.request.path,
                                        self.answer.header("sec-websocket-protocol"),
                                        self.request.header_map())]
        close: Closed | None = None
        for label, frame in flow.frames:
            sender = self.side(label)
            if frame.opcode == "close" and close is None:
                close = Closed(frame.ts, conn, frame.close_code, frame.close_reason or "", sender)
            elif frame.opcode in DATA_OPCODES and frame.fin:
                if frame.message is None:
                    raise TapeSourceError(
                        f"connection {conn} ({_endpoints(flow)}): the {sender}'s message at t="
                        f"{frame.ts - report.first_ts:.6f} s came without its payload "
                        "(compressed, it did not inflate, or tshark did not inflate it: it does "
                        "not when the message is fragmented)")
                records.append(Message(frame.ts, conn, sender, frame.message))
        if close is None:
            ended = flow.up.fin or flow.up.rst or flow.down.fin or flow.down.rst
            last_seen = max(ts for ts in (flow.up.last_ts, flow.down.last_ts) if ts is not None)
            close = Closed(last_seen if ended else report.last_ts, conn, None)
        return [*records, replace(close, t=max(close.t, records[-1].t))]


def _endpoints(flow: Flow) -> str:
    return f"{flow.client}:{flow.client_port} -> {flow.server}:{flow.server_port}"
