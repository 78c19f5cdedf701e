"""What the emulator needs of one API beyond its protocol: a parser and an encoder."""

from __future__ import annotations

from abc import ABC, abstractmethod

from faultlab.emulator.messages import Encoder, Parsed
from faultlab.emulator.personality import Personality
from faultlab.protocols.base import Protocol


class EmulatedApi(ABC):
    protocol: Protocol

    @abstractmethod
    def parse(self, frame: str | bytes) -> Parsed:
        """One client frame as a neutral message; `ProtocolError` for bad input."""

    @abstractmethod
    def encoder(self, dialect: str, personality: Personality) -> Encoder:
        """A new connection's encoder, for the API's `dialect` (Protocol.dialect_of)."""
