"""The run's own events as typed records: faults, frames, TCP, processes and the run itself.
`fault_spans` is the one account of how long each fault lasted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self

from faultlab.events import Event
from faultlab.vocabulary.base import Drawing, Lane, Record, Sender, WireField, _int, _number


class AppliedFault(Protocol):
    """What a `fault.applied` says of the fault (faultlab.faults.Fault): a protocol, so that the
    vocabulary stays a leaf every part of faultlab can import."""

    @property
    def step_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def layer(self) -> str: ...

    def ends(self, details: Mapping[str, Any]) -> Sequence[str]: ...
    @property
    def lasts_s(self) -> float | None: ...


@dataclass(frozen=True)
class FaultApplied(Record):
    """A step's fault is in place, `applied_in_ms` after its application began; `ends`: the
    steps it ended (a restore's reverts, a thaw's freezes); `for_s`: how long it lasts by itself
    (0: done once applied, an abort say; None: until reverted); `details`: the fault's own."""

    NAME: ClassVar[str] = "fault.applied"
    SPREAD: ClassVar[frozenset[str]] = frozenset({"details"})
    step: str
    fault: str
    layer: str
    trigger: str
    applied_in_ms: float
    ends: list[str] = field(default_factory=list)
    for_s: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, fault: AppliedFault, trigger: str, applied_in_ms: float,
           details: Mapping[str, Any]) -> FaultApplied:
        """What a fault's step says once applied, wherever it fired (the run, the proxy)."""
        return cls(step=fault.step_id, fault=fault.name, layer=fault.layer, trigger=trigger,
                   applied_in_ms=round(applied_in_ms, 3), ends=list(fault.ends(details)),
                   for_s=fault.lasts_s, details=dict(details))

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "fault": self.fault, "layer": self.layer,
                               "trigger": self.trigger, "applied_in_ms": self.applied_in_ms,
                               **self.details}
        if self.ends:
            out["ends"] = self.ends
        if self.for_s is not None:
            out["for_s"] = self.for_s
        return out

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        own = {"step", "fault", "layer", "trigger", "applied_in_ms", "ends", "for_s"}
        ends = data.get("ends")
        return cls(step=str(data.get("step")), fault=str(data.get("fault")),
                   layer=str(data.get("layer")), trigger=str(data.get("trigger")),
                   applied_in_ms=_number(data.get("applied_in_ms")) or 0.0,
                   ends=[str(s) for s in ends] if isinstance(ends, list) else [],
                   for_s=_number(data.get("for_s")),
                   details={k: v for k, v in data.items() if k not in own})


@dataclass(frozen=True)
class FaultReverted(Record):
    """A step's fault is undone; `by`: the process that held it, when not the run; `queues`:
    what each of its packet queues saw (queue, packets, dropped), when it had any."""

    NAME: ClassVar[str] = "fault.reverted"
    step: str
    fault: str | None = None
    by: str | None = None
    queues: list[dict[str, int]] | None = None


@dataclass(frozen=True)
class FaultFailed(Record):
    """A step's fault could not be applied: the run ends as a lab failure."""

    NAME: ClassVar[str] = "fault.failed"
    step: str
    fault: str
    error: str


@dataclass(frozen=True)
class FaultRevertFailed(Record):
    """At teardown, a fault could not be undone: recorded, and the lab goes anyway."""

    NAME: ClassVar[str] = "fault.revert_failed"
    error: str


@dataclass(frozen=True)
class FrameLogged(Record):
    """A WebSocket message, as the proxy (`proxy.frame`), the emulator (`emulator.frame`) or a
    browser client's DevTools (`browser.frame`) logs it: who sent it (`from`), the log's own key
    of its connection (`conn`), the run's number of the connection (`k`) when the log knows it,
    its Live API kind and size; `extra`: what the log adds (opcode, audio seconds, dropped,
    injected...)."""

    NAME: ClassVar[str] = "frame"
    # In the order a run's pictures prefer them: a browser's own account of what it sent and
    # received, then the proxy's (it sees both sides), then the emulator's.
    LOGS: ClassVar[tuple[str, ...]] = ("browser", "proxy", "emulator")
    log: str
    sender: Sender
    conn: str | int | None
    kind: str
    bytes: int = 0
    k: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.event_name(self.log)

    @staticmethod
    def event_name(log: str) -> str:
        """The frame event of one log (`proxy.frame`, `emulator.frame`)."""
        return f"{log}.frame"

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(cls.event_name(log) for log in cls.LOGS)

    @classmethod
    def wire_fields(cls) -> dict[str, WireField]:
        return {"from": (Sender, ...), "conn": (str | int | None, None), "k": (int | None, None),
                "kind": (str | None, None), "bytes": (int, 0)}

    def fields(self) -> dict[str, Any]:
        # `k` and `kind` where the log knows them (a binary message has no Live API kind).
        known = {} if self.k is None else {"k": self.k}
        kind = {"kind": self.kind} if self.kind else {}
        return {"from": self.sender, "conn": self.conn, **known, **kind, "bytes": self.bytes,
                **self.extra}

    @classmethod
    def read(cls, event: Event) -> Self | None:
        if event.name not in cls.names():
            return None
        d = event.fields
        # Runs made before the one format wrote `dir` (client->server, in) and the proxy's `flow`:
        # read too, so `faultlab report` draws an older run folder as it was.
        own = {"from", "conn", "k", "kind", "bytes", "dir", "flow"}
        conn = d.get("conn", d.get("flow"))
        sent = d.get("from") or {"client->server": "client", "in": "client"}.get(str(d.get("dir")))
        return cls(log=event.name.removesuffix(".frame"),
                   sender="client" if sent == "client" else "server",
                   conn=conn if isinstance(conn, str | int) else None,
                   kind=str(d.get("kind") or ""), bytes=_int(d.get("bytes")) or 0,
                   k=_int(d.get("k")), extra={k: v for k, v in d.items() if k not in own})


@dataclass(frozen=True)
class TcpConnect(Record):
    """The capture saw a client's SYN: connection `k` of the run (faultlab.connections)."""

    NAME: ClassVar[str] = "tcp.connect"
    DRAWN: ClassVar[Drawing] = Drawing("router", "tcp")
    k: int
    client_port: int | None = None
    server: str | None = None
    server_port: int | None = None

    def label(self) -> str:
        return f"SYN #{self.k}"


@dataclass(frozen=True)
class ProxyUpstream(Record):
    """The proxy connected upstream for the client's connection from `client_port`: its own
    socket `upstream`:`upstream_port` toward `server`:`server_port` (the proxied connection's
    server leg, which packet faults on that connection hurt too)."""

    NAME: ClassVar[str] = "proxy.upstream"
    client_port: int
    upstream: str
    upstream_port: int
    server: str
    server_port: int


@dataclass(frozen=True)
class TcpFin(Record):
    """A FIN on connection `k`, `from` client or server (`both` once paired in a report)."""

    NAME: ClassVar[str] = "tcp.fin"
    DRAWN: ClassVar[Drawing] = Drawing("router", "tcp")
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"sender": "from"}
    MARK: ClassVar[str] = "FIN"
    k: int
    sender: str | None = None

    def label(self) -> str:
        if self.sender == "both":
            return f"{self.MARK} #{self.k} both ways"
        return f"{self.MARK} #{self.k}" + (f" from {self.sender}" if self.sender else "")

    def fields(self) -> dict[str, Any]:
        return {"k": self.k, "from": self.sender}

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        sender = data.get("from")
        return cls(k=_int(data.get("k")) or 0, sender=sender if isinstance(sender, str) else None)


@dataclass(frozen=True)
class TcpRst(TcpFin):
    """A RST on connection `k`, `from` client or server."""

    NAME: ClassVar[str] = "tcp.rst"
    MARK: ClassVar[str] = "RST"


@dataclass(frozen=True)
class ProcessStart(Record):
    """A lab process (client, target, proxy, resolver, turn) started; `member`: where it runs
    (a container's `container` and `image`; `forked`: forked warm by the run's zygote)."""

    NAME: ClassVar[str] = "process.start"
    SPREAD: ClassVar[frozenset[str]] = frozenset({"member"})
    role: str
    pid: int
    argv: list[str]
    member: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        return {"role": self.role, "pid": self.pid, "argv": self.argv, **self.member}

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        argv = data.get("argv")
        return cls(role=str(data.get("role")), pid=_int(data.get("pid")) or 0,
                   argv=[str(a) for a in argv] if isinstance(argv, list) else [],
                   member={k: v for k, v in data.items() if k not in ("role", "pid", "argv")})


@dataclass(frozen=True)
class ProcessExit(Record):
    """A lab process ended: its code, the signal that ended it, and whether the run stopped it
    (`stop_s` after asking) or had to kill it (after `grace_s`)."""

    NAME: ClassVar[str] = "process.exit"
    role: str
    code: int | None = None
    signal: str | None = None
    stopped_by_run: bool | None = None
    stop_s: float | None = None
    killed: bool | None = None
    grace_s: float | None = None

    def drawing(self) -> Drawing:
        lane: Lane = "client" if self.role == "client" else "server"
        return Drawing(lane, "process")

    def label(self) -> str:
        return f"{self.role} exits {self.code}"


@dataclass(frozen=True)
class RunStart(Record):
    """The run began; `unix_time` maps the run clock onto wall time (ts = unix_time + t)."""

    NAME: ClassVar[str] = "run.start"
    profile: str
    path: str
    pid: int
    unix_time: float


@dataclass(frozen=True)
class LabReady(Record):
    """The lab is built, in `setup_ms`; `lab`: what it is (backend, addresses)."""

    NAME: ClassVar[str] = "lab.ready"
    SPREAD: ClassVar[frozenset[str]] = frozenset({"lab"})
    setup_ms: float
    lab: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        return {**self.lab, "setup_ms": self.setup_ms}

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        return cls(_number(data.get("setup_ms")) or 0.0,
                   {k: v for k, v in data.items() if k != "setup_ms"})


@dataclass(frozen=True)
class RunTimeout(Record):
    """The client ran out of the profile's time; it is stopped."""

    NAME: ClassVar[str] = "run.timeout"
    timeout_s: float


@dataclass(frozen=True)
class RunError(Record):
    """The lab or a mechanism failed: the run ends as an error."""

    NAME: ClassVar[str] = "run.error"
    error: str


@dataclass(frozen=True)
class RunInterrupted(Record):
    """A signal ended the run, `during` the run or its teardown."""

    NAME: ClassVar[str] = "run.interrupted"
    during: str


@dataclass(frozen=True)
class RunTeardown(Record):
    """Expectations judge what happened before this; the lab is stopped after it."""

    NAME: ClassVar[str] = "run.teardown"


@dataclass(frozen=True)
class RunEnd(Record):
    """The run's verdict and how long it ran."""

    NAME: ClassVar[str] = "run.end"
    verdict: str
    duration_s: float


@dataclass(frozen=True)
class BadLine(Record):
    """A line of another process's events file that is not a JSON object with an `event` name
    (faultlab.events.EventFileTail): its first characters, and why."""

    NAME: ClassVar[str] = "bad_line"
    line: str
    error: str


@dataclass(frozen=True)
class FaultSpan:
    """How long a step's fault hurt: from the moment its application began (`began`; `t` once in
    place) to `end`, when it was reverted, ended by another step, or its time ran out (None: it
    lasted to the end of the run). `instant`: done once applied (an abort, a restore)."""

    event: Event
    applied: FaultApplied
    end: float | None
    instant: bool = False

    @property
    def step(self) -> str:
        return self.applied.step

    @property
    def t(self) -> float:
        return self.event.t

    @property
    def began(self) -> float:
        return self.event.began


def fault_spans(events: Sequence[Event]) -> list[FaultSpan]:
    """Each applied fault's span, in the order the faults were applied."""
    applied = FaultApplied.all(events)
    ended: dict[str, float] = {}  # each step's first end: reverted, or ended by another step
    for e in events:
        if (reverted := FaultReverted.read(e)) is not None:
            ended.setdefault(reverted.step, e.t)
        elif (ender := FaultApplied.read(e)) is not None:
            for step in ender.ends:
                ended.setdefault(step, e.t)
    spans = []
    for e, fault in applied:
        end = ended.get(fault.step)
        instant = end is None and fault.for_s == 0
        if end is None and fault.for_s is not None:
            end = e.t + fault.for_s
        spans.append(FaultSpan(e, fault, end, instant))
    return spans
