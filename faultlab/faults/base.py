"""What every fault is: parameters validated by its own model, and apply/revert hooks.

A fault knows its layer, what it needs and how to undo itself; the run only calls the hooks
(faultlab.injector), so adding a fault is one module in this package, named after the fault
(imported when a profile names it), its test, and its heading in the fault catalogue (docs/guide/faults.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from faultlab.model import Model

if TYPE_CHECKING:
    from faultlab.connections import ConnectionTable
    from faultlab.lab.base import Lab
    from faultlab.mic import VirtualMic
    from faultlab.resolver.answers import Answer

Layer = Literal["packet", "app", "client"]
# What a fault may need the run to start for it: the proxy, the virtual microphone, the lab's
# resolver (faultlab.resolver), the lab's TURN server (faultlab.turn).
Need = Literal["proxy", "mic", "dns", "turn"]


class FaultParams(Model):
    """A fault's parameters as a profile step writes them (every key of `do` but `fault`)."""

    def referenced_steps(self) -> Sequence[str]:
        """Ids of other steps these parameters name; the profile checks that they exist."""
        return ()


class ProxyChannel(Protocol):
    """What a fault may ask of the run's proxy, which holds every app-level fault."""

    async def apply(self, step: str, fault: str, params: FaultParams) -> dict[str, Any]: ...
    async def revert(self, steps: list[str] | None) -> list[str]: ...


class ResolverChannel(Protocol):
    """What a fault may ask of the lab's resolver, which answers the client's DNS queries."""

    async def set_answer(self, step: str, names: list[str] | None, answer: Answer,
                         delay_s: float) -> list[str]:
        """From now on answer `answer` for `names` (the target's when None); the names hurt."""

    async def clear_answer(self, step: str) -> None: ...


class TurnChannel(Protocol):
    """What a fault may do to the lab's TURN server."""

    async def kill(self) -> int:
        """Kill it (SIGKILL, as a crash); the pid it had."""

    async def start(self) -> None:
        """Start it again, with the same credentials, once each listener is up."""


class FaultContext(Protocol):
    """What the run hands a fault when it applies or reverts it (faultlab.injector.FaultRuntime)."""

    @property
    def lab(self) -> Lab: ...
    @property
    def connections(self) -> ConnectionTable: ...
    @property
    def proxy(self) -> ProxyChannel | None:
        """The proxy's control channel, when the run has a proxy."""
    @property
    def mic(self) -> VirtualMic | None:
        """The client's virtual microphone, when the profile has one."""
    @property
    def resolver(self) -> ResolverChannel | None:
        """The lab resolver's control channel, when the run has one."""
    @property
    def turn(self) -> TurnChannel | None:
        """The lab's TURN server, when the profile has one."""

    async def revert(self, step_ids: Sequence[str] | None) -> list[str]:
        """Revert the named active faults (all when None); returns the ids reverted."""


class Fault[P: FaultParams](ABC):
    """A way to hurt the path. `apply` returns the details recorded in its `fault.applied` event."""

    name: ClassVar[str]
    # Where it hurts, for the catalogue and the `fault.applied` event; the core never branches on it.
    layer: ClassVar[Layer]
    # How it hurts, in a few words (`faultlab doctor` lists every fault with it).
    mechanism: ClassVar[str]
    Params: ClassVar[type[FaultParams]]
    # What the run starts for it (the proxy, the microphone); a profile that cannot provide it is
    # refused.
    needs: ClassVar[frozenset[Need]] = frozenset()
    # False for faults with nothing to undo (restore itself); the run keeps only the others.
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

    def queue_tallies(self) -> list[dict[str, int]] | None:
        """What its packet queues saw, for its `fault.reverted` event, once reverted (None: it
        queues no packets)."""
        return None

    @classmethod
    def proxy_problem(cls, params: FaultParams) -> str | None:
        """Why the fault cannot work with these parameters while the proxy is in the path (the
        client's connection then ends in the router), if it cannot: `validate` refuses it."""
        return None

    def ends(self, details: Mapping[str, Any]) -> Sequence[str]:
        """The other steps whose faults this one ended, from its `apply`'s details (a restore's
        reverts, a thaw's freezes): its `fault.applied` says so, and reports read it there."""
        return ()

    @property
    def lasts_s(self) -> float | None:
        """How long it hurts by itself: None until reverted, 0 for a fault with nothing to undo
        (done once applied); a fault with a `for:` says its own."""
        return None if self.reversible else 0.0

    @property
    def held_by_run(self) -> bool:
        """Whether the run keeps this fault once applied, to revert it later (a fault that lives
        in another process, like the proxy's, is reverted by asking that process)."""
        return self.reversible


class FaultRegistry(Mapping[str, type[Fault[Any]]]):
    """The faults by name, each imported when first named. A fault's module is named after it
    (faultlab/faults/<name>.py registers `name`), so a process imports only the faults its
    profile uses: the proxy imported all 27 (and pyroute2 through them) to apply one. Listing
    them imports them all."""

    def __init__(self, package: str) -> None:
        self._package = package
        self._faults: dict[str, type[Fault[Any]]] = {}
        self._complete = False

    def add(self, cls: type[Fault[Any]]) -> None:
        if cls.name in self._faults:
            raise RuntimeError(f"two faults are named {cls.name!r}")
        self._faults[cls.name] = cls

    def __getitem__(self, name: str) -> type[Fault[Any]]:
        # A name that could be a fault's module; not a private one (`__init__` would be
        # imported a second time, as a module of its own).
        if (isinstance(name, str) and name not in self._faults and not self._complete
                and name.isidentifier() and not name.startswith("_")):
            module = f"{self._package}.{name}"
            if importlib.util.find_spec(module) is not None:
                importlib.import_module(module)
        return self._faults[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return len(self._every())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def _every(self) -> dict[str, type[Fault[Any]]]:
        if not self._complete:
            package = importlib.import_module(self._package)
            for module in pkgutil.iter_modules(package.__path__):
                importlib.import_module(f"{self._package}.{module.name}")
            self._complete = True
        return self._faults


FAULTS = FaultRegistry("faultlab.faults")


def register[F: type[Fault[Any]]](cls: F) -> F:
    """Class decorator: make a fault available to profiles under `cls.name` (its module's name)."""
    FAULTS.add(cls)
    return cls
