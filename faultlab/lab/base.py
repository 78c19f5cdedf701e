"""What every lab backend gives a run: three places on one path, their addresses, a way to run
a process in each, and teardown.

The client and the target sit at the two ends and the router between them; every fault acts on
the router (or, for a few, on the client's own network), so a backend that wires a new kind of
end (a container, an uplink to the real service) gets every fault for free. Each place is a
`Namespace`: a network namespace with a worker thread in it, where faults change rules and links.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, Literal, Self

from faultlab.errors import LabError
from faultlab.lab import zygote
from faultlab.lab.namespace import Namespace
from faultlab.lab.process import HostProcess, Member
from faultlab.lab.uplink import UplinkSpec

Role = Literal["client", "router", "server"]


@dataclass(frozen=True)
class Image:
    """A program run as a container of `name`, sharing the host folders `shared` at the same
    paths (the run folder: its event file, the run's CA, the microphone's socket). With
    `own_command`, the program's argv are arguments to the image's own ENTRYPOINT (replacing its
    CMD); else they are the whole command line."""

    name: str
    shared: tuple[Path, ...] = ()
    own_command: bool = False


@dataclass(frozen=True)
class LabSpec:
    """What a profile asks of any lab: the two links' subnets (client side, server side; None
    picks free ones), per-place sysctls, and the run's name."""

    subnets: tuple[IPv4Network, IPv4Network] | None = None
    sysctl: Mapping[Role, Mapping[str, str | int]] = field(default_factory=dict)
    # The run's name (its folder's), for what the lab leaves in shared places (container labels).
    run: str = ""
    # An uplink from the router to the world outside, for a target that is not in the lab.
    uplink: UplinkSpec | None = None


@dataclass(frozen=True)
class Leftovers:
    """What `lab gc` removes of a backend's labs whose run was SIGKILLed: the slots (see
    `faultlab.lab.netns`) in which it finds the backend's traces, how it removes them from a slot
    whose run is gone (one line each), and the prefixes of the backend's folders in the temp dir
    named with a pid (`<prefix><pid>-*`), removed once that pid is gone."""

    slots: Callable[[], set[int]]
    collect: Callable[[int], list[str]]
    pid_folders: tuple[str, ...] = ()


class Lab(ABC):
    """A lab: an async context manager that builds on enter and always tears down on exit."""

    backend: ClassVar[str]
    # Whether it runs a member as a container of the member's image (`start` with an image); such
    # a lab is for labs with one (a profile gets it by default when a member names an image).
    runs_images: ClassVar[bool] = False
    # What `lab gc` removes of it after a SIGKILL.
    leftovers: ClassVar[Leftovers]
    # The router's interfaces toward the client and the server, and the client's own.
    client_link: ClassVar[str]
    server_link: ClassVar[str]
    client_iface: ClassVar[str]

    @classmethod
    @abstractmethod
    def build(cls, spec: LabSpec) -> Self:
        """A lab to enter, as `spec` asks."""

    @abstractmethod
    def place(self, role: Role) -> Namespace:
        """The network of the client, the router or the server."""

    @property
    def target_link(self) -> str:
        """The router's interface toward the target: the server's link, or an uplink."""
        return self.server_link

    @property
    def client(self) -> Namespace:
        return self.place("client")

    @property
    def router(self) -> Namespace:
        return self.place("router")

    @property
    def server(self) -> Namespace:
        return self.place("server")

    @property
    @abstractmethod
    def scratch(self) -> Path:
        """A folder of this lab's own for what cannot live in the run folder (a unix socket's
        path is limited to 108 bytes): short, private, removed at teardown and, after a SIGKILL,
        by `lab gc` (so tie it to what gc judges the lab's owner by)."""

    @property
    @abstractmethod
    def client_address(self) -> IPv4Address: ...

    @property
    @abstractmethod
    def server_address(self) -> IPv4Address: ...

    @property
    def router_address(self) -> IPv4Address:
        """The router's address on the client's link (the client's gateway), where a service of
        the lab's in the router (its resolver) answers the client."""
        raise LabError(f"the {self.backend} lab does not give its router's address")

    def describe(self) -> dict[str, Any]:
        """The fields of the run's `lab.ready` event."""
        return {"backend": self.backend, "client": str(self.client_address),
                "server": str(self.server_address)}

    async def spawn(self, role: Role, argv: Sequence[str], env: Mapping[str, str],
                    etc: Path | None = None, stdout: int | IO[Any] | None = None,
                    stderr: int | IO[Any] | None = None) -> asyncio.subprocess.Process:
        """Start `argv` in `role`'s place (seeing the files of the folder `etc`, such as `hosts`,
        over /etc's), in a session of its own so that it is stopped by its own process group."""
        return await self.place(role).spawn(argv, env, etc, stdout, stderr)

    async def start(self, role: Role, argv: Sequence[str], env: Mapping[str, str],
                    etc: Path | None, log: Path, image: Image | None = None) -> Member:
        """Start a lab member in `role`'s place, its output appended to `log`: a host process
        (faultlab's own programs forked by this process's zygote: `faultlab.lab.zygote`), or a
        container of `image` on a lab that runs them."""
        if image is not None:
            raise LabError(f"the {self.backend} lab runs no containers")
        if (warm := zygote.current()) is not None and warm.forks(argv, env):
            try:
                if (forked := await warm.start(self.place(role).path, etc, argv, env,
                                               log)) is not None:
                    return forked
            except zygote.ZygoteGone:
                zygote.close_zygote()  # this one and the next start cold
            except OSError as exc:
                raise LabError(f"cannot start {argv[2]!r} in {role}: {exc}") from None
        with log.open("ab") as out:
            return HostProcess(await self.spawn(role, argv, env, etc, stdout=out,
                                                stderr=asyncio.subprocess.STDOUT))

    @abstractmethod
    async def __aenter__(self) -> Self: ...

    @abstractmethod
    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None: ...
