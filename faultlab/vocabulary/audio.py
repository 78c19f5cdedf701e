"""The microphone's events as typed records: the lab's microphone (`mic.*`, faultlab.mic) and a
client's uplink that streams it to the server (`uplink.*`, faultlab.clients.uplink and the
JavaScript clients)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from faultlab.vocabulary.base import Drawing, Record

ON_CLIENT = Drawing("client")
# The families of these events (a summary shows them all).
AUDIO_PREFIXES = ("mic.", "uplink.")


@dataclass(frozen=True)
class MicOpen(Record):
    """The client opened the lab's microphone: `audio_s` of speech, looped when `endless`."""

    NAME: ClassVar[str] = "mic.open"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    audio_s: float
    endless: bool


@dataclass(frozen=True)
class MicUtterance(Record):
    """The microphone begins utterance `n` of its script."""

    NAME: ClassVar[str] = "mic.utterance"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    n: int
    text: str


@dataclass(frozen=True)
class MicEnd(Record):
    """The microphone's speech is over."""

    NAME: ClassVar[str] = "mic.end"
    DRAWN: ClassVar[Drawing] = ON_CLIENT


@dataclass(frozen=True)
class MicClosedByClient(Record):
    """The client closed the microphone before its speech was over."""

    NAME: ClassVar[str] = "mic.closed_by_client"
    DRAWN: ClassVar[Drawing] = ON_CLIENT


@dataclass(frozen=True)
class UplinkStart(Record):
    """The client streams the microphone; `keep_alive`: what it sends when the source stalls
    (None: nothing); `rate`: the page's sample rate (a browser)."""

    NAME: ClassVar[str] = "uplink.start"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"keep_alive"})
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    keep_alive: str | None = None
    rate: float | None = None


@dataclass(frozen=True)
class UplinkSourceBack(Record):
    """The stalled source gives audio again."""

    NAME: ClassVar[str] = "uplink.source_back"
    DRAWN: ClassVar[Drawing] = ON_CLIENT


@dataclass(frozen=True)
class UplinkSourceEnd(Record):
    """The source ended: seconds of audio read, padded with silence, sent and lost."""

    NAME: ClassVar[str] = "uplink.source_end"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    source_s: float | None = None
    silence_s: float | None = None
    sent_s: float | None = None
    lost_s: float | None = None


@dataclass(frozen=True)
class UplinkStreamEnd(Record):
    """The client told the server its audio stream ended."""

    NAME: ClassVar[str] = "uplink.stream_end"
    DRAWN: ClassVar[Drawing] = ON_CLIENT


@dataclass(frozen=True)
class UplinkKeepAlive(Record):
    """The source stalled: the client pads `behind_s` seconds of silence."""

    NAME: ClassVar[str] = "uplink.keep_alive"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    behind_s: float


@dataclass(frozen=True)
class UplinkError(Record):
    """The uplink failed (no microphone, a send failed)."""

    NAME: ClassVar[str] = "uplink.error"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    error: str
