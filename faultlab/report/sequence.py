"""A run as a sequence diagram: lanes, the messages that crossed them, what each side noticed,
the faults as bands, and the moments expectations were judged on; what report.html draws in a
browser and timeline.png draws for a PR comment.

Pure: events and a run's record in, a `View` out (`to_dict` is what the page embeds). Repeated
messages and events (an audio stream, a model turn's chunks, a keep-alive) collapse into one
`Item` spanning them, with their count and audio seconds, so a 15-minute run is a few hundred
items however many frames it sent (faultlab.report.bursts, the rule summary.md's timeline uses
too). A fault's band spans what `fault_spans` says: the report knows no fault by name, and
no event either: each record of the vocabulary declares its lane and colour (`Drawing`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from faultlab.events import Event
from faultlab.frames import connection_of, sender_of
from faultlab.protocols import DEFAULT, PROTOCOLS
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.report.bursts import Burst, bursts
from faultlab.vocabulary import NOT_DRAWN, Drawing, Record, read, record_of
from faultlab.vocabulary.base import Lane as LaneId
from faultlab.vocabulary.lab import PROXY_EVENTS, ProxyWsEnd
from faultlab.vocabulary.run import FrameLogged, TcpFin, TcpRst, fault_spans
from faultlab.vocabulary.server import EMULATOR_PREFIX, ServerClose
from faultlab.vocabulary.session import CLIENT_PREFIX, SESSION_PREFIXES, ClientReceived

if TYPE_CHECKING:
    from faultlab.report.record import RunRecord

# A colour per category, used by the page, the PNG and the legend alike (Okabe-Ito, readable by
# the colour-blind).
PALETTE: dict[str, str] = {
    "setup": "#0072B2",
    "audio": "#56B4E9",
    "content": "#999999",
    "tool_call": "#E69F00",
    "tool_response": "#A6611A",
    "turn_complete": "#009E73",
    "resumption": "#CC79A7",
    "close": "#000000",
    "tcp": "#666666",
    "loss": "#D55E00",
    "refused": "#C00000",
    "recovered": "#1B7837",
    "attempt": "#4B3FBF",
    "conversation": "#7B3294",
    "process": "#8C6D31",
    "note": "#AAAAAA",
}

# A connection's two FINs (or RSTs) this close together are one mark, "both ways".
TCP_PAIR_S = 0.1
LABEL_CHARS = 40  # a marker's text beside it; the tooltip has all of it


@dataclass(frozen=True)
class Lane:
    id: LaneId
    label: str


@dataclass(frozen=True)
class Item:
    """One thing drawn: a message from one lane to another (`to`), or a mark on one lane; a run
    of alike ones from `t` to `t_end` with their `count`."""

    t: float
    lane: LaneId
    name: str
    label: str
    category: str
    to: LaneId | None = None
    t_end: float | None = None
    count: int = 1
    audio_s: float = 0.0
    conn: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Band:
    """A fault, from the moment its application began to its revert (or the end of the run)."""

    step: str
    fault: str
    lane: LaneId
    t: float
    t_end: float
    reverted: bool
    # Done once applied (an abort, a close, a restore): a moment, not a span.
    instant: bool = False
    label: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """An expectation, its verdict, and the moment it was judged on (None: no one moment)."""

    expectation: str
    held: bool
    seen: str
    at: float | None


@dataclass(frozen=True)
class Series:
    """A gauge's readings over the run clock (a strip under the lanes): `points`, (t, value)."""

    name: str
    unit: str
    points: list[tuple[float, float]]


@dataclass(frozen=True)
class View:
    title: str
    verdict: str
    started: str
    t_end: float
    lanes: list[Lane]
    items: list[Item]
    bands: list[Band]
    judgements: list[Judgement]
    files: list[str] = field(default_factory=list)
    error: str | None = None
    description: str = ""
    palette: dict[str, str] = field(default_factory=lambda: dict(PALETTE))
    series: list[Series] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def frames(self) -> int:
        """The messages the view's items stand for."""
        return sum(i.count for i in self.items if i.to is not None)


def _frame_events(events: Sequence[Event]) -> tuple[list[Event], str]:
    """The run's one log of messages: a browser client's, else the proxy's when it had one,
    else the emulator's, else what the client says it received."""
    for name in FrameLogged.names():
        frames = [e for e in events if e.name == name]
        if frames:
            return frames, name
    return [e for e in events if e.name == ClientReceived.NAME], ClientReceived.NAME


def _messages(events: Sequence[Event], protocol: RealtimeApi) -> list[Item]:
    frames, log = _frame_events(events)

    def sender(e: Event) -> str:
        return sender_of(e) or "server"  # client.received: all from the server

    items = []
    for burst in bursts(frames):
        e = burst.first
        kind = str(e.fields.get("kind") or e.fields.get("opcode") or "message")
        src: LaneId = "client" if sender(e) == "client" else "server"
        short = protocol.label_of(kind)
        label = short if burst.count == 1 else f"{short} x{burst.count}"
        if burst.audio_s:
            label += f" ({burst.audio_s:.2f} s audio)"
        items.append(Item(
            t=e.t, lane=src, to="server" if src == "client" else "client", name=log, label=label,
            category=protocol.category_of(kind), t_end=burst.last.t if burst.count > 1 else None,
            count=burst.count, audio_s=round(burst.audio_s, 3), conn=connection_of(e),
            fields=burst.fields))
    # Closes, with their code, from the same log's side.
    for e in events:
        if ServerClose.is_one(e) and log == FrameLogged.event_name("emulator"):
            items.append(Item(t=e.t, lane="server", to="client", name=e.name,
                              label=f"close {e.fields.get('code')}", category="close",
                              conn=connection_of(e), fields=Burst((e,)).fields))
        elif (end := ProxyWsEnd.read(e)) is not None and log == FrameLogged.event_name("proxy") \
                and end.code:
            by_client = bool(end.closed_by_client)
            items.append(Item(t=e.t, lane="client" if by_client else "server",
                              to="server" if by_client else "client", name=e.name,
                              label=f"close {e.fields.get('code')}", category="close",
                              conn=connection_of(e), fields=Burst((e,)).fields))
    return items


def _pair_tcp(events: Sequence[Event]) -> list[Event]:
    """`events` with a connection's FIN (or RST) from each side, `TCP_PAIR_S` apart at most, made
    one event from "both"."""
    out: list[Event] = []
    pending: dict[tuple[str, object], int] = {}  # (name, k) -> index in out of a lone FIN/RST
    for e in events:
        if e.name not in (TcpFin.NAME, TcpRst.NAME):
            out.append(e)
            continue
        key = (e.name, e.fields.get("k"))
        i = pending.pop(key, None)
        if i is not None and e.t - out[i].t <= TCP_PAIR_S \
                and out[i].fields.get("from") != e.fields.get("from"):
            out[i] = Event(out[i].t, out[i].source, out[i].name, {**out[i].fields, "from": "both"})
            continue
        pending[key] = len(out)
        out.append(e)
    return out


def short_name(name: str) -> str:
    """An event's name without its family where the lane says it (`lost`, not `client.lost`)."""
    head, _, rest = name.partition(".")
    return rest if rest and f"{head}." in (CLIENT_PREFIX, EMULATOR_PREFIX) else name


def drawing_of(e: Event, pack_events: tuple[str, ...] = ()) -> tuple[Drawing, str | None]:
    """How an event is drawn, and its mark's text (None: its name): as its record declares;
    else (a server's event the vocabulary holds no record of, a session's event of a client's
    own, a pack's named for the summary) as a note on its side's lane."""
    record = read(e)
    if record is not None:
        return record.drawing(), record.label()
    if (declared := record_of(e.name)) is not None:
        return declared.DRAWN, None
    if e.name.startswith(EMULATOR_PREFIX):
        return Drawing("server"), None
    if e.name.startswith(SESSION_PREFIXES) or (pack_events and e.name.startswith(pack_events)):
        return Drawing("client"), None
    return NOT_DRAWN, None


def _marker_label(e: Event, label: str | None) -> str:
    if label is not None:
        return label
    text = e.fields.get("text")
    if isinstance(text, str) and text:
        label = f"{short_name(e.name)}: {text}"
        return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "\u2026"
    return short_name(e.name)


def _markers(events: Sequence[Event], pack_events: tuple[str, ...]) -> list[Item]:
    items: list[Item] = []
    placed = [(e, drawn) for e in _pair_tcp(events)
              if (drawn := drawing_of(e, pack_events))[0].lane is not None]
    by_event = {id(e): drawn for e, drawn in placed}
    for burst in bursts(e for e, _ in placed):
        e = burst.first
        drawing, label = by_event[id(e)]
        assert drawing.lane is not None
        text = _marker_label(e, label) if burst.count == 1 \
            else f"{short_name(e.name)} x{burst.count}"
        items.append(Item(t=e.t, lane=drawing.lane, name=e.name, label=text,
                          category=drawing.category,
                          t_end=burst.last.t if burst.count > 1 else None, count=burst.count,
                          conn=connection_of(e), fields=burst.fields))
    return items


LAYER_LANES: dict[str, LaneId] = {"app": "proxy", "client": "client"}


def _band_label(step: str, fault: str, fields: Mapping[str, Any]) -> str:
    """`wifi-gone: drop (first connection)`: a band spans every connection the run had, so one
    that hurt only some of them says which."""
    scope = []
    connection = fields.get("connection")
    if isinstance(connection, int):
        scope.append(f"connection {connection} only")
    elif connection is not None:
        scope.append(f"{connection} connection only")
    if fields.get("direction") in ("up", "down"):
        scope.append({"up": "client to server", "down": "server to client"}[fields["direction"]])
    return f"{step}: {fault}" + (f" ({', '.join(scope)})" if scope else "")


def _bands(events: Sequence[Event], t_end: float, lanes: set[LaneId]) -> list[Band]:
    bands = []
    for span in fault_spans(events):
        applied = span.applied
        lane = LAYER_LANES.get(applied.layer, "router")
        bands.append(Band(step=span.step, fault=applied.fault,
                          lane=lane if lane in lanes else "router", t=span.began,
                          t_end=t_end if span.end is None else max(span.end, span.began),
                          reverted=span.end is not None, instant=span.instant,
                          label=_band_label(span.step, applied.fault, applied.details),
                          fields=Burst((span.event,)).fields))
    return bands


def _series(events: Sequence[Event]) -> list[Series]:
    """What the vocabulary's plotted records read, a series per gauge, in their records' order;
    a record's readings are each of its sources' own (two clients' counters never mix)."""
    points: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    last: dict[tuple[str, str], Record] = {}
    for e in events:
        record = read(e)
        if record is None or not record.PLOTTED:
            continue
        key = (e.name, e.source)
        for gauge_name, value in record.readings(last.get(key)).items():
            if math.isfinite(value):
                points.setdefault((e.name, e.source, gauge_name), []).append((e.t, value))
        last[key] = record
    sources = {(name, source) for name, source, _ in points}
    several = len({source for _, source in sources}) > 1
    return [Series(f"{gauge.name} ({source})" if several else gauge.name, gauge.unit,
                   points[(name, source, gauge.name)])
            for name, source in dict.fromkeys((n, s) for n, s, _ in points)
            if (declared := record_of(name)) is not None
            for gauge in declared.PLOTTED if (name, source, gauge.name) in points]


def build_view(events: Sequence[Event], record: RunRecord, *, description: str = "",
               pack_events: tuple[str, ...] = ()) -> View:
    """The view of one run: its events and its record (verdict, expectations)."""
    # Other processes' events reach the bus a little late: in the order they happened (an event
    # whose time is not a number has no place on the clock).
    events = sorted((e for e in events if math.isfinite(e.t)), key=lambda e: e.t)
    t_end = max((e.t for e in events), default=record.duration_s)
    proxied = any(e.name in PROXY_EVENTS for e in events)
    lanes = [Lane("client", "client"), *([Lane("proxy", "proxy")] if proxied else []),
             Lane("router", "router"), Lane("server", "server")]
    protocol = PROTOCOLS.get(record.protocol, DEFAULT)
    items = sorted([*_messages(events, protocol), *_markers(events, pack_events)],
                   key=lambda i: (i.t, i.lane))
    judgements = [Judgement(e["expectation"], bool(e["held"]), str(e["seen"]), e.get("at"))
                  for e in record.expectations]
    return View(
        title=record.profile, verdict=record.verdict, started=record.started, t_end=t_end,
        lanes=lanes, items=items, bands=_bands(events, t_end, {lane.id for lane in lanes}),
        judgements=judgements, files=list(record.attachments), error=record.error,
        description=description, series=_series(events))
