"""What a client says of its session, as typed records: connected, lost, recovered, refused; the
resume attempts and a new session's recovery; the conversation (tool calls and responses, the
question and its answer, the model's audio). Any client writes them (faultlab's reference
clients, in Python and JavaScript, and one's own: docs/guide/own-client.md); the
expectations and the report read them.

`SESSION_PREFIXES`: a client's own event of these families that no record declares is still its
session's, drawn as a note on the client's lane.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from faultlab.vocabulary.base import Drawing, Record

# A client's own events, whose family its lane's marks leave out (`lost`).
CLIENT_PREFIX = "client."
SESSION_PREFIXES = (CLIENT_PREFIX, "resume.", "recovery.")


def _on_client(category: str = "note") -> Drawing:
    return Drawing("client", category)


# The session's life.


@dataclass(frozen=True)
class ClientConnecting(Record):
    """The client is opening connection `attempt` to `url`."""

    NAME: ClassVar[str] = "client.connecting"
    DRAWN: ClassVar[Drawing] = _on_client()
    attempt: int | None = None
    url: str | None = None


@dataclass(frozen=True)
class ClientConnected(Record):
    """The client's session is set up (its first connection); `connect_ms`: how long it took."""

    NAME: ClassVar[str] = "client.connected"
    DRAWN: ClassVar[Drawing] = _on_client("setup")
    attempt: int | None = None
    local_port: int | None = None
    connect_ms: float | None = None


@dataclass(frozen=True)
class ClientConnectFailed(Record):
    """Connection `attempt` failed before it opened."""

    NAME: ClassVar[str] = "client.connect_failed"
    DRAWN: ClassVar[Drawing] = _on_client()
    attempt: int | None = None
    error: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class ClientRefused(Record):
    """The server refused the session: its close `code` (an API error's, a string, where it
    refused in-band; None: no WebSocket at all) and why."""

    NAME: ClassVar[str] = "client.refused"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"code"})
    DRAWN: ClassVar[Drawing] = _on_client("refused")
    code: int | str | None = None
    reason: str | None = None

    def label(self) -> str:
        return f"refused {self.code}"


@dataclass(frozen=True)
class ClientLost(Record):
    """The client noticed its session is gone (`why`: a close, missed pings...)."""

    NAME: ClassVar[str] = "client.lost"
    DRAWN: ClassVar[Drawing] = _on_client("loss")
    why: str | None = None
    unanswered_s: float | None = None
    silence_s: float | None = None

    def label(self) -> str | None:
        return f"lost ({self.why})" if self.why else None


@dataclass(frozen=True)
class ClientRecovered(Record):
    """The model's first output after a loss (`kind`), `since_loss_s` after it."""

    NAME: ClassVar[str] = "client.recovered"
    DRAWN: ClassVar[Drawing] = _on_client("recovered")
    since_loss_s: float | None = None
    kind: str | None = None


@dataclass(frozen=True)
class ClientClosed(Record):
    """A connection closed, with its code; `by`: self or peer."""

    NAME: ClassVar[str] = "client.closed"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"code"})
    DRAWN: ClassVar[Drawing] = _on_client()
    code: int | None = None
    reason: str | None = None
    by: str | None = None
    received_close: bool | None = None


@dataclass(frozen=True)
class ClientError(Record):
    """Something failed in the client (an API's error message, an exception)."""

    NAME: ClassVar[str] = "client.error"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"code"})
    DRAWN: ClassVar[Drawing] = _on_client()
    error: str | None = None
    type: str | None = None
    code: int | str | None = None
    message: str | None = None


@dataclass(frozen=True)
class ClientDone(Record):
    """The client is done: its exit `code`, or its `outcome`, and the `signal` that ended it."""

    NAME: ClassVar[str] = "client.done"
    DRAWN: ClassVar[Drawing] = _on_client()
    code: int | None = None
    signal: str | None = None
    outcome: str | None = None
    listened_s: float | None = None


@dataclass(frozen=True)
class ClientSdkChanged(Record):
    """The SDK no longer has what the client reaches into (`missing`): it does without."""

    NAME: ClassVar[str] = "client.sdk_changed"
    DRAWN: ClassVar[Drawing] = _on_client()
    missing: str


@dataclass(frozen=True)
class ClientReceived(Record):
    """A message the client received, by kind (a client's own log, when no frame log has it);
    a tool call's `ids` and `tools` (written `names`)."""

    NAME: ClassVar[str] = "client.received"
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"tools": "names"}
    kind: str | None = None
    ids: list[str | None] | None = None
    tools: list[str | None] | None = None


@dataclass(frozen=True)
class ClientMessage(Record):
    """A message a test peer's client received, as text (its first characters)."""

    NAME: ClassVar[str] = "client.message"
    DRAWN: ClassVar[Drawing] = _on_client()
    text: str


@dataclass(frozen=True)
class ClientNoAnswer(Record):
    """A turn the model did not answer within `waited_s`."""

    NAME: ClassVar[str] = "client.no_answer"
    DRAWN: ClassVar[Drawing] = _on_client()
    turn: int
    waited_s: float


# The old connection, once a new one replaced it (faultlab.clients.liveness).


@dataclass(frozen=True)
class ClientOldBack(Record):
    """The connection given up for lost answered after all, `since_loss_s` after the loss."""

    NAME: ClassVar[str] = "client.old_back"
    DRAWN: ClassVar[Drawing] = _on_client()
    since_loss_s: float


@dataclass(frozen=True)
class ClientOldClose(Record):
    """The client closes the connection it replaced, with `code`."""

    NAME: ClassVar[str] = "client.old_close"
    DRAWN: ClassVar[Drawing] = _on_client()
    code: int


@dataclass(frozen=True)
class ClientOldClosed(Record):
    """The replaced connection is closed; `echoed`: the close code the server echoed (None:
    none came)."""

    NAME: ClassVar[str] = "client.old_closed"
    DRAWN: ClassVar[Drawing] = _on_client()
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"echoed"})
    echoed: int | None = None
    echo_ms: float | None = None


# Resuming the session (its resumption handle) after a loss.


@dataclass(frozen=True)
class ResumeAttempt(Record):
    """Resume attempt `n`, `since_loss_s` after the loss."""

    NAME: ClassVar[str] = "resume.attempt"
    DRAWN: ClassVar[Drawing] = _on_client("attempt")
    n: int | None = None
    since_loss_s: float | None = None

    def label(self) -> str:
        return "resume" if self.n is None else f"resume #{self.n}"


@dataclass(frozen=True)
class ResumeRefused(Record):
    """Resume attempt `n` was refused with close `code` (an API error's, a string, where it
    refused in-band; None: no WebSocket, `error` says why)."""

    NAME: ClassVar[str] = "resume.refused"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"code"})
    DRAWN: ClassVar[Drawing] = _on_client("refused")
    n: int | None = None
    code: int | str | None = None
    error: str | None = None
    latency_ms: float | None = None

    def label(self) -> str:
        return f"refused {self.code}"


@dataclass(frozen=True)
class ResumeOk(Record):
    """Resume attempt `n` worked, `latency_ms` after it began."""

    NAME: ClassVar[str] = "resume.ok"
    DRAWN: ClassVar[Drawing] = _on_client("recovered")
    n: int | None = None
    latency_ms: float | None = None
    since_loss_s: float | None = None


@dataclass(frozen=True)
class ResumeGaveUp(Record):
    """No resume worked after `attempts` attempts."""

    NAME: ClassVar[str] = "resume.gave_up"
    DRAWN: ClassVar[Drawing] = _on_client("refused")
    attempts: int


# A new session in place of the lost one.


@dataclass(frozen=True)
class RecoveryStandby(Record):
    """The session was quiet `quiet_s`: a standby connection is opened (a racing client)."""

    NAME: ClassVar[str] = "recovery.standby"
    DRAWN: ClassVar[Drawing] = _on_client()
    quiet_s: float


@dataclass(frozen=True)
class RecoveryRace(Record):
    """Resuming and a new session raced; `winner` won."""

    NAME: ClassVar[str] = "recovery.race"
    DRAWN: ClassVar[Drawing] = _on_client()
    winner: str
    since_loss_s: float | None = None


@dataclass(frozen=True)
class RecoveryAttempt(Record):
    """New-session attempt `n`, `since_loss_s` after the loss."""

    NAME: ClassVar[str] = "recovery.attempt"
    DRAWN: ClassVar[Drawing] = _on_client("attempt")
    n: int | None = None
    since_loss_s: float | None = None


@dataclass(frozen=True)
class RecoveryFailed(Record):
    """A new session could not be had (`code`: the server's close code, when it refused)."""

    NAME: ClassVar[str] = "recovery.failed"
    DRAWN: ClassVar[Drawing] = _on_client("refused")
    n: int | None = None
    code: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class RecoveryNewSession(Record):
    """A new session replaced the lost one, `since_loss_s` after the loss."""

    NAME: ClassVar[str] = "recovery.new_session"
    DRAWN: ClassVar[Drawing] = _on_client("recovered")
    since_loss_s: float | None = None


@dataclass(frozen=True)
class RecoveryRestored(Record):
    """The new session was told the conversation so far: `lines` of status, and whether the
    question was `asked` again."""

    NAME: ClassVar[str] = "recovery.restored"
    DRAWN: ClassVar[Drawing] = _on_client()
    lines: int | None = None
    asked: bool | None = None


# The conversation.


@dataclass(frozen=True)
class ToolCall(Record):
    """The model called tool `tool` (written `name`) with `args`; `id`: the call's (null when
    the API gave it none)."""

    NAME: ClassVar[str] = "client.tool_call"
    DRAWN: ClassVar[Drawing] = _on_client("tool_call")
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"tool": "name"}
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"id"})
    id: str | None
    tool: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResponse(Record):
    """The client answered call `id` (with the backend's `booking`, in the booking scenario)."""

    NAME: ClassVar[str] = "client.tool_response"
    DRAWN: ClassVar[Drawing] = _on_client("tool_response")
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"id"})
    id: str | None
    booking: str | None = None


@dataclass(frozen=True)
class StatusNote(Record):
    """The client told a new session what became of a call its lost session made."""

    NAME: ClassVar[str] = "client.status_note"
    DRAWN: ClassVar[Drawing] = _on_client("conversation")
    booking: str | None = None
    status: str | None = None


@dataclass(frozen=True)
class Ask(Record):
    """The user's question, as the client asked it."""

    NAME: ClassVar[str] = "client.ask"
    DRAWN: ClassVar[Drawing] = _on_client("conversation")
    text: str


@dataclass(frozen=True)
class Answer(Record):
    """What the model answered in one turn (its text, or the transcript of its audio)."""

    NAME: ClassVar[str] = "client.answer"
    DRAWN: ClassVar[Drawing] = _on_client("conversation")
    text: str


@dataclass(frozen=True)
class AudioStart(Record):
    """The model began to speak."""

    NAME: ClassVar[str] = "client.audio_start"
    DRAWN: ClassVar[Drawing] = _on_client()


@dataclass(frozen=True)
class AudioEnd(Record):
    """The model's turn ended after `audio_s` seconds of speech."""

    NAME: ClassVar[str] = "client.audio_end"
    DRAWN: ClassVar[Drawing] = _on_client()
    audio_s: float
