"""The docker lab: the namespace lab, with the client (or the target) run as a container of the
user's image and wired into the same router, so that every fault, the capture and the proxy work
on it as on a namespace member.

A container is started through the Docker Engine API with no network of the engine's
(`--network none`), as root with `NET_ADMIN` (for the client's own iptables, as the field study's
round 3 used), with docker's init (so that a SIGTERM reaches the program), labelled with the lab's
slot and the run's lease. Its program is held by a small wrapper until its network is there: the lab's
end of the veth is moved from the member's namespace into the container's, addressed and routed
as before, and the lab's name for that place (`faultlab-<slot>-<role>`) is bound to the
container's network, so that faults reach it by the same name and it outlives the container
until teardown. Then the wrapper execs the program. Its output goes to the member's log; the
containers go at teardown, and after a SIGKILL with `lab gc` (`faultlab.lab.engine`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pyroute2 import IPRoute

from faultlab.errors import LabError
from faultlab.interrupt import uncancelled
from faultlab.lab.base import Image, LabSpec, Leftovers, Role
from faultlab.lab.engine import (
    LABEL_OWNER,
    LABEL_ROLE,
    LABEL_RUN,
    LABEL_SLOT,
    connect,
    container_slots,
    engine_errors,
    engine_exceptions,
    engine_url,
    has_path,
    quietly,
    remove_containers,
)
from faultlab.lab.links import configure_end, wait_links_up
from faultlab.lab.namespace import Namespace, remove_namespace, write_sysctl
from faultlab.lab.netns import NetnsLab, owner_text
from faultlab.lab.privilege import in_user_namespace
from faultlab.lab.process import Ending, Member
from faultlab.peers import IMAGE_PYTHON

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

# Where the wrapper waits for the lab to say "go": a FIFO from the lab's scratch folder.
HOLD = "/run/faultlab-hold"
HOLD_SH = 'read -r _ < "$0" && exec "$@"'
HOLD_PY = ("import os, sys\nif not open(sys.argv[1]).readline(): sys.exit(1)\n"
           "os.execvp(sys.argv[2], sys.argv[2:])")
PYTHONS = ("/usr/local/bin/python3", "/usr/bin/python3")
# Where a program is looked for when neither the profile nor the image sets PATH (docker's).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How long the wrapper may take to open its FIFO once the container runs.
HOLD_TIMEOUT_S = 10.0


class DockerLab(NetnsLab):
    """The namespace lab whose client or target may be a container (`Lab.start` with an image)."""

    backend: ClassVar[str] = "docker"
    runs_images: ClassVar[bool] = True
    # Its containers; its namespaces and slot are the namespace lab's.
    leftovers: ClassVar[Leftovers] = Leftovers(container_slots, remove_containers)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run_name = ""
        self._engine: DockerClient | None = None
        self._containers: list[Container] = []

    @classmethod
    def build(cls, spec: LabSpec) -> Self:
        lab = super().build(spec)
        lab.run_name = spec.run
        return lab

    async def __aenter__(self) -> Self:
        if os.geteuid() != 0 or in_user_namespace():
            raise LabError("a container in the lab needs root: the engine's containers live in "
                           "the host's namespaces (run faultlab as root)")
        if not engine_url().startswith("unix://"):
            raise LabError(f"the docker lab wires containers on this machine's kernel: it needs "
                           f"a local engine (a unix socket), not DOCKER_HOST={engine_url()}")
        self._engine = await asyncio.to_thread(connect)
        try:
            return await super().__aenter__()
        except BaseException:
            self._engine.close()
            raise

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            # Before the namespaces: a container's network is bound to one of their names.
            await uncancelled(asyncio.to_thread(self._remove_containers))
        finally:
            await super().__aexit__(et, e, tb)
            if self._engine is not None:
                self._engine.close()

    async def start(self, role: Role, argv: Sequence[str], env: Mapping[str, str],
                    etc: Path | None, log: Path, image: Image | None = None) -> Member:
        if image is None:
            return await super().start(role, argv, env, etc, log)
        # A thread cannot be stopped: a run cancelled meanwhile waits for the container to be
        # known, so that the teardown removes it.
        return await uncancelled(asyncio.to_thread(
            self._start_container, role, list(argv), dict(env), etc, log, image,
            asyncio.get_running_loop()))

    def _start_container(self, role: Role, argv: list[str], env: dict[str, str],
                         etc: Path | None, log: Path, image: Image,
                         loop: asyncio.AbstractEventLoop) -> ContainerMember:
        assert self._engine is not None
        from docker.errors import ImageNotFound

        with engine_errors(f"cannot start the {role} container of {image.name!r}"):
            try:
                config = self._engine.images.get(image.name).attrs["Config"] or {}
            except ImageNotFound:
                raise LabError(f"image {image.name!r} is not in the local engine: build it (for "
                               f"faultlab's own, make images) or docker pull it") from None
            command = _command(image, argv, config, role)
            hold = self.scratch / f"{role}.hold"
            hold.unlink(missing_ok=True)
            os.mkfifo(hold, 0o600)
            try:
                container = self._create(role, image, command, env, etc, hold, config)
                container.start()
                container.reload()
                pid = _local_pid(container, hold, log, role)
                try:
                    self._wire(role, pid)
                except Exception as exc:  # pyroute2's NetlinkError (an OSError) or its own
                    raise LabError(f"cannot wire the {role} container into the lab: "
                                   f"{exc}") from None
                _release(hold, container, pid, log, role)
            finally:
                hold.unlink(missing_ok=True)
        return ContainerMember(container, pid, log, loop)

    def _create(self, role: Role, image: Image, command: list[str], env: dict[str, str],
                etc: Path | None, hold: Path, config: dict[str, Any]) -> Container:
        """The container, created with a wrapper that holds `command` until released; an image
        with no shell is tried with its Python, one with neither refused, as is one without the
        program."""
        from docker.types import Mount

        assert self._engine is not None
        mounts = [Mount(str(folder), str(folder), type="bind") for folder in image.shared]
        mounts.append(Mount(HOLD, str(hold), type="bind", read_only=True))
        if etc is not None:
            mounts += [Mount(f"/etc/{name}", str(etc.absolute() / name), type="bind",
                             read_only=True) for name in sorted(os.listdir(etc))]
        spec: dict[str, Any] = dict(
            image=image.name, command=command, environment=env, network_mode="none",
            cap_add=["NET_ADMIN"], init=True, mounts=mounts, name=f"faultlab-{self.slot}-{role}",
            # As root, like a namespace member: NET_ADMIN is a root's capability, and the run
            # folder it shares is private to root.
            user="0",
            labels={LABEL_SLOT: str(self.slot), LABEL_ROLE: role, LABEL_RUN: self.run_name,
                    LABEL_OWNER: owner_text(os.getpid())},
        )
        container = self._create_named(spec, ["/bin/sh", "-c", HOLD_SH, HOLD])
        if not has_path(container, "/bin/sh"):
            python = next((p for p in PYTHONS if has_path(container, p)), None)
            self._remove(container)
            if python is None:
                raise LabError(f"image {image.name!r} has neither /bin/sh nor python3: faultlab "
                               f"holds the {role}'s program until its network is wired with one "
                               f"of them; add a shell to the image (e.g. busybox)")
            container = self._create_named(spec, [python, "-c", HOLD_PY, HOLD])
        if not _finds(container, command[0], env, config):
            self._remove(container)
            hint = (" (faultlab's builtins need faultlab in the image: faultlab-clients, from make"
                    " images)" if command[0] == IMAGE_PYTHON else "")
            raise LabError(f"image {image.name!r} has no {command[0]!r} on its PATH{hint}: give "
                           f"the {role} a 'command' the image has")
        return container

    def _create_named(self, spec: dict[str, Any], entrypoint: list[str]) -> Container:
        """Create, replacing a leftover of the same name (the slot's lease says that nobody
        else's container has it: a SIGKILLed run's, not yet collected)."""
        from docker.errors import APIError

        assert self._engine is not None
        for attempt in range(2):
            try:
                container = self._engine.containers.create(**spec, entrypoint=entrypoint)
                self._containers.append(container)
                return container
            except APIError as exc:
                if exc.status_code != 409 or attempt:
                    raise
                with quietly():
                    self._engine.api.remove_container(spec["name"], force=True)
        raise AssertionError("unreachable")

    def _remove(self, container: Container) -> None:
        with quietly():
            container.remove(force=True)
        self._containers.remove(container)

    def _wire(self, role: Role, pid: int) -> None:
        """Move the lab's end of the link into the container's network, and name that network
        as the place was named."""
        ns = self.namespaces[role]
        ns.call(_move_link, "eth0", pid)
        ns.close()
        remove_namespace(ns.path)
        self.namespaces[role] = joined = Namespace.bind(role, ns.path, Path(f"/proc/{pid}/ns/net"))
        a = self.addressing
        address, gateway = ((a.client, a.router_client.ip) if role == "client"
                            else (a.server, a.router_server.ip))
        joined.call(configure_end, "eth0", address, gateway)
        joined.call(wait_links_up, ("eth0",))
        # The router's end lost its carrier while its peer moved.
        self.router.call(wait_links_up, (self.client_link if role == "client" else self.server_link,))
        for name, value in self.sysctl.get(role, {}).items():
            joined.call(write_sysctl, name, value)

    def _remove_containers(self) -> None:
        for container in self._containers:
            with quietly():
                container.remove(force=True)
        self._containers.clear()


def _command(image: Image, argv: list[str], config: dict[str, Any], role: str) -> list[str]:
    """What the container runs: the program's own command line, or (`own_command`) the image's
    ENTRYPOINT with `argv`, or else its CMD, after it, as `docker run IMAGE ARGS` does."""
    if image.own_command:
        argv = [*(config.get("Entrypoint") or []), *(argv or config.get("Cmd") or [])]
    if not argv:
        raise LabError(f"image {image.name!r} has no command of its own: give the {role} a "
                       f"'command'")
    return argv


def _finds(container: Container, program: str, env: dict[str, str],
           config: dict[str, Any]) -> bool:
    """Whether `program` is in the container, as its PATH (the given one, else the image's)
    finds it; a relative path is the program's business."""
    if "/" in program:
        return not program.startswith("/") or has_path(container, program)
    image_env = dict(e.split("=", 1) for e in config.get("Env") or [] if "=" in e)
    path = env.get("PATH") or image_env.get("PATH") or DEFAULT_PATH
    return any(has_path(container, f"{folder}/{program}") for folder in path.split(":") if folder)


def _local_pid(container: Container, hold: Path, log: Path, role: str) -> int:
    """The container's first process, as this machine's pid: only an engine on this kernel has
    one (its root shows the FIFO the lab made), and only then can the lab reach its network."""
    pid = int(container.attrs["State"]["Pid"])
    if pid == 0:
        with log.open("ab") as out:
            out.write(container.logs())
        raise LabError(f"the {role} container exited at once: see {log}")
    mine = os.stat(hold)
    try:
        seen = os.stat(f"/proc/{pid}/root{HOLD}")
        same_net = os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        seen, same_net = None, False
    if seen is None or (seen.st_dev, seen.st_ino) != (mine.st_dev, mine.st_ino) or same_net:
        raise LabError("the Docker engine does not run on this machine's kernel (its container "
                       "is no process here): the docker lab needs a local engine; elsewhere run "
                       "the whole lab in the faultlab image")
    return pid


def _move_link(ifname: str, pid: int) -> None:
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname=ifname)[0], net_ns_pid=pid)


def _release(hold: Path, container: Container, pid: int, log: Path, role: str) -> None:
    """Tell the wrapper to exec the program, once it waits on the FIFO."""
    deadline = time.monotonic() + HOLD_TIMEOUT_S
    while True:
        try:
            fd = os.open(hold, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:  # ENXIO: nobody reads yet
            if exc.errno != errno.ENXIO:
                raise
        if not os.path.exists(f"/proc/{pid}") or time.monotonic() > deadline:
            with log.open("ab") as out:
                out.write(container.logs())
            raise LabError(f"the {role} container's wrapper did not wait for its network "
                           f"(within {HOLD_TIMEOUT_S:g}s): see {log}")
        time.sleep(0.002)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


class ContainerMember:
    """A running container, as the run watches a lab member: its output copied to the log, its
    exit code when it ends; stopped with SIGTERM through docker's init, then SIGKILL."""

    began = None

    def __init__(self, container: Container, pid: int, log: Path,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.container = container
        self._pid = pid
        self._code: int | None = None
        self._signalled = False
        self._loop = loop
        self._exited = asyncio.Event()
        threading.Thread(target=self._follow, args=(log,), daemon=True,
                         name=f"container-{container.name}").start()

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._code

    def describe(self) -> dict[str, Any]:
        return {"container": self.container.short_id, "image": self.container.attrs["Config"]["Image"]}

    def _follow(self, log: Path) -> None:
        """Copy the container's output to `log` until it ends, then take its exit code."""
        code = 255
        failures: tuple[type[BaseException], ...] = (*engine_exceptions(), OSError)
        try:
            with log.open("ab") as out:
                for chunk in self.container.logs(stream=True, follow=True):
                    out.write(chunk)
                    out.flush()
            code = int(self.container.wait()["StatusCode"])
        except failures as exc:
            with contextlib.suppress(OSError), log.open("a") as out:
                out.write(f"\nfaultlab: lost the container's output or exit code: {exc}\n")
        # docker's init exits 128+N when a signal N ended the program: told as the signal when
        # the run sent it, as a host process's ending is.
        self._code = -(code - 128) if self._signalled and 128 < code <= 128 + 64 else code
        with contextlib.suppress(RuntimeError):  # the run's loop is gone: nobody waits
            self._loop.call_soon_threadsafe(self._exited.set)

    async def wait(self) -> int:
        await self._exited.wait()
        assert self._code is not None
        return self._code

    async def terminate(self, grace_s: float) -> Ending:
        if self._code is not None:
            return Ending(self._code)
        started = time.monotonic()
        self._signalled = True
        await asyncio.to_thread(self._kill, signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.wait(), grace_s)
            return Ending(code, stopped=True, grace_s=grace_s, stop_s=time.monotonic() - started)
        except TimeoutError:
            await asyncio.to_thread(self._kill, signal.SIGKILL)
            code = await self.wait()
            return Ending(code, stopped=True, killed=True, grace_s=grace_s,
                          stop_s=time.monotonic() - started)

    def _kill(self, sig: signal.Signals) -> None:
        with quietly():  # it ended meanwhile, or the engine is gone: its exit is reported anyway
            self.container.kill(signal=sig.name)
