"""The one numbering of a run's connections, and the one way to choose among them.

Connection k is the k-th TCP connection the client opened toward the target, counted from 1 in the
order the router first saw its SYN (a retransmitted SYN is the same connection). The capture gives
the numbers (`tcp.connect` k) and every other part takes them by the client's port: packet faults
(`connection: k`), the proxy (the run tells it each number as the SYN is seen) and frame triggers
(the proxy's and the emulator's frames are mapped by port). A connection whose SYN the path
dropped still has its number, though no server ever saw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field

ConnectionChoice = Literal["first", "latest"] | Annotated[int, Field(ge=1, strict=True)]


def choose[T](connections: Sequence[T], which: ConnectionChoice) -> T | None:
    """`first`, `latest`, or the k-th (1-based) of `connections`, in the order seen; None when
    there is no such connection (yet)."""
    if not connections:
        return None
    if which == "first":
        return connections[0]
    if which == "latest":
        return connections[-1]
    if isinstance(which, int) and 1 <= which <= len(connections):
        return connections[which - 1]
    return None
