"""The server's events as typed records: what the emulator (faultlab.emulator), a cassette's replay
(faultlab.cassette.replay) and the echo/tick peer (faultlab.peers.ws_server) write.

One set of connection records (`ServerConnect`, `ServerClose`, `ServerDisconnect`) serves the
emulator and the replay alike: a replayed connection opens, closes and ends as an emulated one
does. `conn` is the server's own number of a connection (1, 2, ... in the order they opened).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from faultlab.vocabulary.base import Drawing, Record, _int

__all__ = [
    "ECHO_PREFIX",
    "EMULATOR_PREFIX",
    "CassetteDiverged",
    "CassetteFailed",
    "CassettePlay",
    "CassetteWritten",
    "EchoClosed",
    "EchoConnected",
    "EchoListening",
    "EchoStopped",
    "EmulatorAborted",
    "EmulatorAnswer",
    "EmulatorCall",
    "EmulatorContextTrimmed",
    "EmulatorErrorTold",
    "EmulatorForgot",
    "EmulatorHeard",
    "EmulatorListening",
    "EmulatorNudge",
    "EmulatorRefused",
    "EmulatorReleased",
    "EmulatorRepeat",
    "EmulatorResumeRefused",
    "EmulatorResumed",
    "EmulatorTcpGaveUp",
    "EmulatorToolResponse",
    "EmulatorToolResponseIgnored",
    "EmulatorVad",
    "ServerClose",
    "ServerConnect",
    "ServerDisconnect",
]

# The emulator's own events are notes on the server's lane unless they say otherwise; its
# connections and frames are drawn as messages and TCP marks, not as marks of their own.
EMULATOR_PREFIX = "emulator."
# The test peers' echo server, whose events a summary shows.
ECHO_PREFIX = "server."
_NOTE = Drawing("server")

# The connection's life, as the emulator and a cassette's replay tell it.


@dataclass(frozen=True)
class ServerConnect(Record):
    """A client's WebSocket opened: the server's connection `conn`, in the API's dialect `api`
    (`developer`, `vertex`, `ga`...), from the client's `client_port` (by which the run numbers
    it as the router saw it, faultlab.connections)."""

    NAME: ClassVar[str] = "emulator.connect"
    conn: int
    api: str
    client_port: int | None = None


@dataclass(frozen=True)
class ServerClose(Record):
    """The server closed connection `conn` with `code` and `reason` (told as the close is sent,
    not when it was decided); `why`: the behaviour or error that closed it; `detail`: what the
    close frame's 123 bytes cut (`detail`), or an emulator bug's `error`."""

    NAME: ClassVar[str] = "emulator.close"
    # The close frame's cut `detail` (a string) and a bug's `error` are the event's own fields.
    SPREAD: ClassVar[frozenset[str]] = frozenset({"detail"})
    conn: int
    code: int
    reason: str
    why: str
    detail: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        return {"conn": self.conn, "code": self.code, "reason": self.reason, "why": self.why,
                **self.detail}

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Self:
        own = {"conn", "code", "reason", "why"}
        return cls(conn=_int(data.get("conn")) or 0, code=_int(data.get("code")) or 0,
                   reason=str(data.get("reason") or ""), why=str(data.get("why") or ""),
                   detail={k: v for k, v in data.items() if k not in own})


@dataclass(frozen=True)
class ServerDisconnect(Record):
    """Connection `conn` is gone from the server's view (a close frame, FIN, RST, or the
    server's own close); `timed_out`: its TCP gave up retransmitting."""

    NAME: ClassVar[str] = "emulator.disconnect"
    conn: int
    timed_out: bool | None = None  # only ever written True

    @classmethod
    def of(cls, conn: int, timed_out: bool) -> ServerDisconnect:
        return cls(conn, True if timed_out else None)


# The emulator's server as a whole.


@dataclass(frozen=True)
class EmulatorListening(Record):
    """The emulator serves on `host`:`port`, as `personality`, its timers times `time_scale`."""

    NAME: ClassVar[str] = "emulator.listening"
    host: str
    port: int
    personality: str
    time_scale: float


@dataclass(frozen=True)
class EmulatorAborted(Record):
    """At shutdown, `connections` that did not answer the server's 1001 were aborted."""

    NAME: ClassVar[str] = "emulator.aborted"
    DRAWN: ClassVar[Drawing] = _NOTE
    connections: int


@dataclass(frozen=True)
class EmulatorCall(Record):
    """A WebRTC call of the emulator (faultlab.emulator.webrtc) that carries connection `conn`:
    `answered` (its offer), then its peer connection's states (`connecting`, `connected` with the
    candidate `pair` ICE chose, `disconnected`, `failed`, `closed`), `moved` when ICE nominated
    another `pair` (a peer-reflexive one: the user's NAT rebound the call), `no channel` (the
    events' channel never opened), and `ended`, with the user's audio the call carried: `heard_s` came,
    `concealed_s` was missing (lost, or dropped by the jitter buffer) and concealed."""

    NAME: ClassVar[str] = "emulator.call"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    call: str
    state: str
    pair: dict[str, str] | None = None
    heard_s: float | None = None
    concealed_s: float | None = None

    def label(self) -> str | None:
        if self.pair is None:
            return f"call {self.state}"
        return f"call {self.state} ({self.pair['local']}/{self.pair['protocol']})"


@dataclass(frozen=True)
class EmulatorRefused(Record):
    """A request the emulator refused: a handshake answered with HTTP `status` (None: none
    sent, the request could not be parsed) and `reason`, or, once open, connection `conn`
    closed with `code` (no identity). `path` never carries the query (it may carry a key)."""

    NAME: ClassVar[str] = "emulator.refused"
    DRAWN: ClassVar[Drawing] = _NOTE
    reason: str
    conn: int | None = None
    path: str | None = None
    status: int | None = None
    code: int | None = None

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.conn is None else {"conn": self.conn}
        if self.path is not None:
            out["path"] = self.path
        if self.code is None:
            out["status"] = self.status  # a handshake's, even when none was sent
        else:
            out["code"] = self.code
        return {**out, "reason": self.reason}


@dataclass(frozen=True)
class EmulatorForgot(Record):
    """The emulator forgot `sessions` whose handles died; `kept`: the sessions it still holds."""

    NAME: ClassVar[str] = "emulator.forgot"
    DRAWN: ClassVar[Drawing] = _NOTE
    sessions: int
    kept: int


# A connection's session: its resumption and its hold.


@dataclass(frozen=True)
class EmulatorResumed(Record):
    """Connection `conn` resumed `session` with one of its handles."""

    NAME: ClassVar[str] = "emulator.resumed"
    DRAWN: ClassVar[Drawing] = Drawing("server", "recovered")
    conn: int
    session: str


@dataclass(frozen=True, kw_only=True)
class EmulatorResumeRefused(Record):
    """Connection `conn` asked to resume `session` (None: a dead handle's, not written) and
    was refused, `why`; `answered` False: left without an answer (S5)."""

    NAME: ClassVar[str] = "emulator.resume_refused"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    session: str | None = None
    why: str
    answered: bool | None = None


@dataclass(frozen=True)
class EmulatorReleased(Record):
    """Connection `conn` let go of `session` (it ended); `speaking`: the model was speaking."""

    NAME: ClassVar[str] = "emulator.release"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    session: str
    speaking: bool


@dataclass(frozen=True)
class EmulatorTcpGaveUp(Record):
    """Connection `conn` ended with its TCP giving up: it holds `session` until it would have
    been reaped (L8)."""

    NAME: ClassVar[str] = "emulator.tcp_gave_up"
    DRAWN: ClassVar[Drawing] = Drawing("server", "loss")
    conn: int
    session: str


@dataclass(frozen=True)
class EmulatorErrorTold(Record):
    """A client's error told in-band on connection `conn` (OpenAI), which stays open: its
    `code` (the API's error code), `message` (cut at 500 characters) and `why`."""

    NAME: ClassVar[str] = "emulator.error"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    code: str
    message: str
    why: str


# A connection's conversation (faultlab.emulator.turns).


@dataclass(frozen=True)
class EmulatorVad(Record):
    """The server's VAD on connection `conn` heard speech `start` or `end`, `audio_s` into it."""

    NAME: ClassVar[str] = "emulator.vad"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    kind: str
    audio_s: float


@dataclass(frozen=True)
class EmulatorHeard(Record):
    """The user's turn on connection `conn` ended: `audio_s` of speech, `recognised` as one of
    the registry's utterances (`text`, or a stand-in); `dropped_s`: audio past what is kept."""

    NAME: ClassVar[str] = "emulator.heard"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    audio_s: float
    recognised: bool
    text: str
    dropped_s: float | None = None


@dataclass(frozen=True)
class EmulatorAnswer(Record):
    """The model answers on connection `conn`: `parts` of the user's and `results` of tools,
    with `calls` (function names) and `speech` (None: none)."""

    NAME: ClassVar[str] = "emulator.answer"
    DRAWN: ClassVar[Drawing] = Drawing("server", "conversation")
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"speech"})
    conn: int
    parts: int
    results: int
    calls: list[str]
    speech: str | None


@dataclass(frozen=True)
class EmulatorNudge(Record):
    """A turn on connection `conn` that asked for nothing new: not answered, `why`."""

    NAME: ClassVar[str] = "emulator.nudge"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    why: str


@dataclass(frozen=True)
class EmulatorRepeat(Record):
    """A resumed session's model says again, on connection `conn`, `text` a drop cut (R6)."""

    NAME: ClassVar[str] = "emulator.repeat"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    text: str


@dataclass(frozen=True)
class EmulatorContextTrimmed(Record):
    """The session on connection `conn` forgot its oldest `chars` of conversation."""

    NAME: ClassVar[str] = "emulator.context_trimmed"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    chars: int


@dataclass(frozen=True)
class EmulatorToolResponse(Record):
    """Connection `conn` answered the model's call `id` to `function` (written `name`)."""

    NAME: ClassVar[str] = "emulator.tool_response"
    DRAWN: ClassVar[Drawing] = _NOTE
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"function": "name"}
    conn: int
    id: str
    function: str


@dataclass(frozen=True)
class EmulatorToolResponseIgnored(Record):
    """A tool response on connection `conn` for call `id`, unknown or already answered."""

    NAME: ClassVar[str] = "emulator.tool_response_ignored"
    DRAWN: ClassVar[Drawing] = _NOTE
    conn: int
    id: str


# A cassette's replay.


@dataclass(frozen=True)
class CassettePlay(Record):
    """Connection `conn` plays the cassette's recorded connection `recorded`."""

    NAME: ClassVar[str] = "cassette.play"
    conn: int
    recorded: int


@dataclass(frozen=True)
class CassetteWritten(Record):
    """A run with `record` wrote its sessions as the cassette `path` (in its folder)."""

    NAME: ClassVar[str] = "cassette.written"
    path: str


@dataclass(frozen=True)
class CassetteFailed(Record):
    """A run with `record` could not write its cassette: why."""

    NAME: ClassVar[str] = "cassette.failed"
    error: str


@dataclass(frozen=True)
class CassetteDiverged(Record):
    """Connection `conn`'s client sent what recorded connection `recorded` (None: none was
    left) did not: `expected` and `received`; `then`: `strict` closed it, `fallback` handed it
    to the emulator."""

    NAME: ClassVar[str] = "cassette.diverged"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"recorded"})
    conn: int
    recorded: int | None
    expected: str
    received: str
    then: str


# The echo/tick peer (faultlab.peers.ws_server): `n` numbers its connections.


@dataclass(frozen=True)
class EchoListening(Record):
    """The echo/tick server listens on `host`:`port`."""

    NAME: ClassVar[str] = "server.listening"
    host: str
    port: int


@dataclass(frozen=True)
class EchoConnected(Record):
    """The echo/tick server's connection `n` opened, from `peer` (host:port)."""

    NAME: ClassVar[str] = "server.connected"
    n: int
    peer: str


@dataclass(frozen=True)
class EchoClosed(Record):
    """The echo/tick server's connection `n` ended: the close `code` (None: none) and `reason`,
    whether the client's close was `received_close`, and how many messages it `echoed`."""

    NAME: ClassVar[str] = "server.closed"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"code"})
    n: int
    code: int | None
    reason: str
    received_close: bool
    echoed: int


@dataclass(frozen=True)
class EchoStopped(Record):
    """The echo/tick server stopped, after `connections` connections."""

    NAME: ClassVar[str] = "server.stopped"
    connections: int
