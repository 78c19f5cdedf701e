"""What every fault is: parameters validated by its own model, and apply/revert hooks.

A fault knows its layer and how to undo itself; the runner only calls the hooks, so adding a fault
is one module in this package (found by name at import), its test, and its README heading.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from ipaddress import IPv4Address
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from faultlab.model import Model

if TYPE_CHECKING:
    from faultlab.capture.live import ConnectionTable
    from faultlab.lab.namespace import Namespace
    from faultlab.mic import VirtualMic
    from faultlab.proxy.control import ProxyControl

Layer = Literal["packet", "app", "client"]


class FaultParams(Model):
    """A fault's parameters as a profile step writes them (every key of `do` but `fault`)."""

    def referenced_steps(self) -> Sequence[str]:
        """Ids of other steps these parameters name; the profile checks that they exist."""
        return ()


class LabView(Protocol):
    """The parts of a lab a fault may touch."""

    @property
    def client(self) -> Namespace: ...
    @property
    def router(self) -> Namespace: ...
    @property
    def server(self) -> Namespace: ...
    @property
    def client_link(self) -> str:
        """The router's interface toward the client."""
    @property
    def server_link(self) -> str:
        """The router's interface toward the server."""
    @property
    def client_iface(self) -> str:
        """The client's own interface."""
    @property
    def client_address(self) -> IPv4Address: ...
    @property
    def server_address(self) -> IPv4Address: ...


class FaultContext(Protocol):
    """What the runner hands a fault when it applies or reverts it."""

    @property
    def lab(self) -> LabView: ...
    @property
    def connections(self) -> ConnectionTable: ...
    @property
    def proxy(self) -> ProxyControl | None:
        """The proxy's control channel, when the run has a proxy."""
    @property
    def mic(self) -> VirtualMic | None:
        """The client's virtual microphone, when the profile has one."""

    async def revert(self, step_ids: Sequence[str] | None) -> list[str]:
        """Revert the named active faults (all when None); returns the ids reverted."""


class Fault[P: FaultParams](ABC):
    """A way to hurt the path. `apply` returns the details recorded in its `fault.applied` event."""

    name: ClassVar[str]
    layer: ClassVar[Layer]
    Params: ClassVar[type[FaultParams]]
    # False for faults with nothing to undo (restore itself); the runner keeps only the others.
    reversible: ClassVar[bool] = True

    def __init__(self, step_id: str, params: P) -> None:
        self.step_id = step_id
        self.params = params

    @abstractmethod
    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        """Hurt the path; return once the kernel (or proxy) has the change."""

    @abstractmethod
    async def revert(self, ctx: FaultContext) -> None:
        """Undo `apply`; the network is as before the fault."""
