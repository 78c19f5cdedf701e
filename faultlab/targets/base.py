"""What a run needs of its target, whatever kind it is.

A kind answers, for the launcher, the runner and the profile's checks: the command line and the
variables it runs with, whether it runs in the server's namespace, the port the client connects
to, the names the client resolves to it and the address they resolve to, the trust the client
(and the proxy, upstream) needs, whether the lab needs an uplink, and whether it writes a frame
log of its own. None of them asks which kind a target is.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from faultlab.connections import ConnectionTable
from faultlab.errors import LabError
from faultlab.protocols import DEFAULT
from faultlab.protocols import Protocol as RealtimeApi

if TYPE_CHECKING:
    from faultlab.lab.base import Lab
    from faultlab.lab.uplink import UplinkSpec
    from faultlab.problems import Loc
    from faultlab.tls import LabCA


class Surroundings(Protocol):
    """What a kind reads of the run that starts it (the launcher)."""

    @property
    def lab(self) -> Lab: ...

    @property
    def run_dir(self) -> Path: ...

    @property
    def ca(self) -> LabCA:
        """The run's own CA: the emulator's and the proxy's certificates, the client's trust."""

    @property
    def speech(self) -> Path | None:
        """The microphone's clips, when the run has a microphone."""

    def profile_path(self, path: Path) -> Path:
        """A path the profile gives, relative to the profile's folder."""

    @property
    def tape(self) -> Path | None:
        """Where a target that `records` writes its tape, when the run records."""


class TargetKind(ABC):
    """One kind of target, as the run meets it."""

    # Its name, as a profile's `target` names it (`emulator`, `remote`) or `program`.
    name: ClassVar[str]
    # Whether it runs in the server's namespace: started there, and waited for on its port.
    in_lab: ClassVar[bool] = True
    # Whether it writes a frame log of its own, which frame triggers follow without the proxy:
    # the event by which that log tells each connection's client port (None: it writes none).
    frame_log: ClassVar[str | None] = None
    # Whether it records its own tape when the run records (`run.tape`); a run that records
    # any other target puts the proxy in front of it, which records.
    records: ClassVar[bool] = False

    @property
    def protocol(self) -> RealtimeApi:
        """The realtime API its clients speak: it names the run's messages (the proxy's frame
        log, frame triggers, message faults, replies, the swimlanes)."""
        return DEFAULT

    @property
    @abstractmethod
    def listen_port(self) -> int:
        """The port the client connects to."""

    def misfit(self) -> str | None:
        """Why the target's other fields do not go with this kind, if they do not."""
        return None

    def connections(self, address: str | None) -> ConnectionTable:
        """The client's connections to count: those to its port, at `address` when that is known
        before the run."""
        return ConnectionTable(self.listen_port, address)

    def target_env(self, host: str) -> dict[str, str]:
        """What every program is told of where it is (`host`: `FAULTLAB_TARGET_HOST`)."""
        return {"FAULTLAB_TARGET_PORT": str(self.listen_port),
                "FAULTLAB_TARGET": f"{host}:{self.listen_port}"}

    def argv(self, run: Surroundings) -> list[str]:
        """Its command line in the server's namespace."""
        raise LabError(f"a {self.name} target runs nothing in the lab")

    def env(self, run: Surroundings) -> dict[str, str]:
        """Its own variables, over faultlab's and the profile's `env`."""
        return {}

    def address(self, lab: Lab) -> str | None:
        """The address its names resolve to in the lab; None: the client asks DNS."""
        return str(lab.server_address)

    def host(self, lab: Lab) -> str:
        """What the programs are told the target's host is (`FAULTLAB_TARGET_HOST`)."""
        return str(lab.server_address)

    def client_names(self) -> list[str]:
        """The names the client resolves to its address, beside the profile's `hosts`."""
        return []

    def dns_names(self) -> list[str]:
        """The names the client may look the target up by (beside `hosts`): those it resolves
        to its address, by default."""
        return self.client_names()

    def client_env(self, run: Surroundings, proxied: bool) -> dict[str, str]:
        """What the client needs in its environment to reach it (trust, a base URL), on the
        direct path or, `proxied`, through the proxy (whose certificates the run's CA issues)."""
        return {}

    def resolver(self) -> IPv4Address | None:
        """The name server the client asks, if the client needs one (its `resolv.conf`)."""
        return None

    def upstream_ca(self, run: Surroundings) -> Path | None:
        """What the proxy verifies its certificate with; None: the proxy does not verify."""
        return None

    @property
    def uplink(self) -> UplinkSpec | None:
        """The uplink the lab needs to reach it, if it is outside the lab."""
        return None

    def profile_problems(self, hosts: Sequence[str], sysctl: Collection[str],
                         subnets: Mapping[str, IPv4Network], folder: Path) -> list[tuple[Loc, str]]:
        """What does not go with it in the rest of the profile: its `hosts`, the places its
        `network.sysctl` sets, its `network.subnets` by side; `folder` is the profile's."""
        return []
