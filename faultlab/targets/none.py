"""No target: a profile whose client talks to nothing faultlab starts (a client that reaches
only its own loopback, or that fails to connect at all). Its address is the lab's server
address, which nothing answers on; it brings no names, trust, port or protocol of its own."""

from __future__ import annotations

from typing import ClassVar

from faultlab.connections import ConnectionTable
from faultlab.targets.base import TargetKind


class NoTarget(TargetKind):
    name: ClassVar[str] = "none"
    in_lab: ClassVar[bool] = False

    @property
    def listen_port(self) -> int:
        raise AttributeError("a run without a target has no port to connect to")

    def connections(self, address: str | None) -> ConnectionTable:
        return ConnectionTable()

    def target_env(self, host: str) -> dict[str, str]:
        return {}
