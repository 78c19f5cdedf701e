"""The toy client's events as records of faultlab's vocabulary: brought by its client kind
(`ToyClient.records`), so the report draws them and `faultlab events check` knows them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from faultlab.vocabulary import Drawing, Record


@dataclass(frozen=True)
class ToyConnected(Record):
    """The toy client's socket is open."""

    NAME: ClassVar[str] = "toy.connected"
    DRAWN: ClassVar[Drawing] = Drawing("client", "setup")
    url: str


@dataclass(frozen=True)
class ToyReady(Record):
    """The toy API set the session up."""

    NAME: ClassVar[str] = "toy.ready"
    session: str | None = None


@dataclass(frozen=True)
class ToyCall(Record):
    """The toy model called a function."""

    NAME: ClassVar[str] = "toy.call"
    DRAWN: ClassVar[Drawing] = Drawing("client", "tool_call")
    WIRE_NAMES: ClassVar[dict[str, str]] = {"function": "name"}
    function: str


@dataclass(frozen=True)
class ToyReply(Record):
    """The toy model's answer."""

    NAME: ClassVar[str] = "toy.reply"
    DRAWN: ClassVar[Drawing] = Drawing("client", "conversation")
    text: str


@dataclass(frozen=True)
class ToyDone(Record):
    """The toy model's turn is over."""

    NAME: ClassVar[str] = "toy.done"


RECORDS = (ToyConnected, ToyReady, ToyCall, ToyReply, ToyDone)
