"""The lab's parts' events as typed records: the proxy (`proxy.*` but its frames and upstream,
faultlab.vocabulary.run), the resolver and the queries it answered, the TURN server, the target,
the capture."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from faultlab.vocabulary.base import Drawing, Record
from faultlab.vocabulary.run import FrameLogged, ProxyUpstream


@dataclass(frozen=True)
class ProxyReady(Record):
    """The run's proxy listens on `port`."""

    NAME: ClassVar[str] = "proxy.ready"
    port: int


@dataclass(frozen=True)
class ProxyStart(Record):
    """The proxy process started, on `port`."""

    NAME: ClassVar[str] = "proxy.start"
    port: int


@dataclass(frozen=True)
class ProxyStop(Record):
    """The proxy process is stopping."""

    NAME: ClassVar[str] = "proxy.stop"


@dataclass(frozen=True)
class ProxyWsStart(Record):
    """The proxy opened a WebSocket (`conn`: its own key; `k`: the run's number) between
    `client` and `server`, for `path`."""

    NAME: ClassVar[str] = "proxy.ws_start"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"k", "client_port", "client", "server"})
    conn: str
    k: int | None = None
    client_port: int | None = None
    path: str | None = None
    client: str | None = None
    server: str | None = None


@dataclass(frozen=True)
class ProxyWsEnd(Record):
    """A proxied WebSocket ended, with its close `code` (None: no close frame) and who closed
    it."""

    NAME: ClassVar[str] = "proxy.ws_end"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"k", "code", "reason", "closed_by_client"})
    conn: str | None = None
    k: int | None = None
    code: int | None = None
    reason: str | None = None
    closed_by_client: bool | None = None


@dataclass(frozen=True)
class ProxyRewrote(Record):
    """A rewrite step changed fields of a message of `kind` (`changed`, written `fields`)."""

    NAME: ClassVar[str] = "proxy.rewrote"
    # `fields` is the record's own method: the attribute has another name.
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"changed": "fields"}
    step: str
    kind: str
    changed: list[str]


@dataclass(frozen=True)
class ResolverReady(Record):
    """The lab's resolver answers at `address` for `hosts` (written `names`), forwarding the rest
    upstream."""

    NAME: ClassVar[str] = "resolver.ready"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"upstream"})
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"hosts": "names"}
    address: str
    hosts: list[str]
    upstream: str | None = None


@dataclass(frozen=True)
class TurnReady(Record):
    """The lab's TURN server listens at `address` on `transports` (`udp`, `tcp`, `tls`), its
    URLs handed to the client as `urls`."""

    NAME: ClassVar[str] = "turn.ready"
    address: str
    transports: list[str]
    urls: list[str]


@dataclass(frozen=True)
class TurnAllocation(Record):
    """The TURN server gave a client a relayed address (`relayed`) in session `session`, over
    TLS or not (`tls`), as its log says (faultlab.turn_log)."""

    NAME: ClassVar[str] = "turn.allocation"
    DRAWN: ClassVar[Drawing] = Drawing("server")
    session: str
    relayed: str | None
    tls: bool


@dataclass(frozen=True)
class TurnRefused(Record):
    """The TURN server refused a client's `request` that carried credentials in session
    `session` (`code` and `reason`: 401 Unauthorized for a wrong or expired credential)."""

    NAME: ClassVar[str] = "turn.refused"
    DRAWN: ClassVar[Drawing] = Drawing("server", "refused")
    session: str
    request: str
    code: int
    reason: str


@dataclass(frozen=True)
class TurnClosed(Record):
    """A session of the TURN server ended (`client`: its address; `transport`: udp, tcp or tls;
    coturn's `reason`: a client's close, an allocation's expiry), having carried
    `bytes_from_client` and `bytes_to_client`."""

    NAME: ClassVar[str] = "turn.closed"
    DRAWN: ClassVar[Drawing] = Drawing("server", "close")
    session: str
    client: str
    transport: str
    reason: str
    bytes_from_client: int | None = None
    bytes_to_client: int | None = None


@dataclass(frozen=True)
class DnsQuery(Record):
    """The resolver answered query `query` (written `name`) of `type`: `answer` (a step's
    fault, `step`, may have decided it, after `delay_ms`)."""

    NAME: ClassVar[str] = "dns.query"
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"query": "name"}
    query: str
    type: str
    answer: str
    step: str | None = None
    delay_ms: float | None = None


@dataclass(frozen=True)
class TargetReady(Record):
    """The target listens on `port`."""

    NAME: ClassVar[str] = "target.ready"
    port: int


@dataclass(frozen=True)
class CaptureStart(Record):
    """The capture listens on `iface` (and the server's side on `server_iface`)."""

    NAME: ClassVar[str] = "capture.start"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"pid"})
    iface: str
    pid: int | None = None
    server_iface: str | None = None


@dataclass(frozen=True)
class CaptureStop(Record):
    """The capture stopped after `packets` packets (and those the kernel dropped)."""

    NAME: ClassVar[str] = "capture.stop"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"dropped_by_kernel"})
    packets: int
    dropped_by_kernel: int | None = None
    server_dropped_by_kernel: int | None = None


# Every event only a run with a proxy has: its frames and upstream legs too.
PROXY_EVENTS = frozenset({
    *(r.NAME for r in (ProxyReady, ProxyStart, ProxyStop, ProxyWsStart, ProxyWsEnd, ProxyRewrote,
                       ProxyUpstream)),
    FrameLogged.event_name("proxy")})
