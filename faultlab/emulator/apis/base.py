"""What the emulator needs of one API beyond its protocol: how a session opens, a parser of
the client's frames, an encoder of the server's, and how the API ends a connection."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from random import Random

from faultlab.emulator.messages import Encoder, Parsed, Setup
from faultlab.emulator.personality import Personality
from faultlab.emulator.refusals import ProtocolError
from faultlab.protocols.base import Protocol


class EmulatedApi(ABC):
    protocol: Protocol

    @abstractmethod
    def parse(self, frame: str | bytes) -> Parsed:
        """One client frame as a neutral message; `ProtocolError` for bad input."""

    @abstractmethod
    def encoder(self, dialect: str, personality: Personality, rng: Random) -> Encoder:
        """A new connection's encoder, for the API's `dialect` (Protocol.dialect_of)."""

    def prepare(self) -> None:
        """Read what parsing needs before the first connection, not while a client waits."""
        return None

    def opening(self, path: str, headers: Mapping[str, str]) -> Setup | None:
        """The session a connection opens by itself, from its request's path and headers (None:
        the client's first message opens it); `ProtocolError` for a request the service
        refuses once the WebSocket is open."""
        return None

    @abstractmethod
    def model_id(self, model: str) -> str | None:
        """The id a personality's model patterns match in a model name (None: not a name)."""

    def closes_on(self, error: ProtocolError) -> tuple[int, str] | None:
        """The close an error ends the connection with (None: it stays open)."""
        return error.code, error.reason

    @abstractmethod
    def lifetime_over(self, personality: Personality) -> tuple[int, str]:
        """The close code and reason of a connection that reached its longest life."""
