"""What faultlab knows of one realtime API, in one object: the service's names, how its messages
are named (their kinds) and drawn, where its server listens and how a request shows who it is.

Everything that logs, matches, draws or serves messages asks the run's protocol instead of
knowing one API's wire: the proxy's frame log, frame triggers, the message faults, the
expectations on replies, the swimlanes, the capture's WebSocket walk, the emulator's routes.
This module stays light (no SDK, no TLS stack): the proxy's addon and the pcap tools load it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar


def pcm16_seconds(data: Any, rate: int) -> float:
    """How long base64-encoded 16-bit mono PCM at `rate` Hz plays (0 for anything but a
    string), counted from the encoding's length without decoding it."""
    if not isinstance(data, str):
        return 0.0
    size = len(data) * 3 // 4 - data[-2:].count("=")
    return size / 2 / rate


@dataclass(frozen=True)
class Service:
    """A service an unmodified client reaches by its real names."""

    name: str
    # The names its SDKs connect to by default; the first is its default endpoint.
    hosts: tuple[str, ...]
    # What a certificate for it covers: its names, a wildcard for the regional ones.
    certificate_names: tuple[str, ...]
    # The variables that point its SDKs at another base URL (an emulator's), and the path that
    # URL ends with (OpenAI's SDKs: /v1).
    base_url_variables: tuple[str, ...]
    base_path: str = ""

    @property
    def endpoint(self) -> str:
        """The host name of its default endpoint."""
        return self.hosts[0]


class Protocol(ABC):
    """One realtime API. Kinds are strings the protocol spells (one per message); profiles
    match them with `kind_matches`, which may accept other spellings."""

    name: ClassVar[str]
    service: ClassVar[Service]
    # Where a request carries its credentials: query parameters and headers (lower case).
    credential_params: ClassVar[tuple[str, ...]]
    credential_headers: ClassVar[tuple[str, ...]]
    # Where a browser, which cannot set headers, puts its key: a WebSocket subprotocol that
    # starts with one of these (the key is the rest of it).
    credential_subprotocols: ClassVar[tuple[str, ...]] = ()
    # The WebSocket subprotocols its server answers with, the first of them a client offers
    # (OpenAI's browsers offer `realtime` beside their key); a client offering none gets none.
    subprotocols: ClassVar[tuple[str, ...]] = ()
    # The service's APIs a request's path can reach (`dialect_of`), the first the one a
    # connection that names none means; a personality's `api` is one of them.
    dialects: ClassVar[tuple[str, ...]]
    # The environment variables that give a client its API key.
    secret_env: ClassVar[tuple[str, ...]]
    # The kinds (as a profile writes them) of a message in which the model says something or
    # calls a tool: what "a reply" means to the expectations.
    reply_kinds: ClassVar[tuple[str, ...]]
    # The kinds of a client message that is one chunk of a stream (audio, video), which clients
    # cut as they like: a cassette's replay takes a run of them for one (faultlab.cassette).
    stream_kinds: ClassVar[tuple[str, ...]] = ()
    # Whether the service also takes calls over WebRTC (its events on a data channel, audio on
    # tracks; faultlab.emulator.webrtc emulates OpenAI Realtime's).
    webrtc: ClassVar[bool] = False

    @abstractmethod
    def recognises(self, message: Mapping[str, Any]) -> bool:
        """Whether a decoded JSON object has this protocol's shape (for a capture, whose
        protocol no run names)."""

    @abstractmethod
    def kind_of(self, message: Mapping[str, Any]) -> str:
        """The kind of one message, a decoded JSON object."""

    @abstractmethod
    def kind_matches(self, actual: str, wanted: str) -> bool:
        """Whether a message of kind `actual` is one a profile asking for `wanted` means."""

    @abstractmethod
    def normalise(self, data: Any) -> Any:
        """A decoded message as profiles address its fields (`equals`, `regex`, `rewrite`)."""

    @abstractmethod
    def describe(self, content: bytes | str) -> dict[str, Any]:
        """`kind` and a few details of one message as it crossed the wire (empty when it is not
        one of this protocol's)."""

    @abstractmethod
    def category_of(self, kind: str) -> str:
        """The colour group of a kind in the swimlanes (faultlab.report.sequence.PALETTE)."""

    def label_of(self, kind: str) -> str:
        """A kind as the swimlanes print it beside its arrow."""
        return kind

    def is_reply(self, kind: str) -> bool:
        """Whether a server message of this kind is the model saying something or calling a
        tool."""
        return any(self.kind_matches(kind, wanted) for wanted in self.reply_kinds)

    def is_stream(self, kind: str) -> bool:
        """Whether a client message of this kind is one chunk of a stream."""
        return any(self.kind_matches(kind, wanted) for wanted in self.stream_kinds)

    @abstractmethod
    def dialect_of(self, path: str) -> str | None:
        """Which of the service's APIs a WebSocket request's path reaches (the request line's
        path, its query included), or None for a path the service does not serve."""

    def subprotocol_for(self, offered: Sequence[str]) -> str | None:
        """The subprotocol the service answers a WebSocket request offering `offered` with
        (None: none; it never refuses an offer)."""
        return next((name for name in self.subprotocols if name in offered), None)

    def authorised(self, headers: Mapping[str, str], query: Mapping[str, list[str]]) -> bool:
        """Whether a request shows an identity (a key or a token), as the service asks of
        every request before it looks at anything else."""
        offered = headers.get("sec-websocket-protocol") or ""
        return (any(headers.get(name) for name in self.credential_headers)
                or any(query.get(name) for name in self.credential_params)
                or any(prefix in offered for prefix in self.credential_subprotocols))
