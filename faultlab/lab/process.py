"""The lab's programs (the client, the target): started in their place as a host process or a
container (a `Member`), watched, and stopped by their own PID or container."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from faultlab.connections import Transport
from faultlab.errors import LabError
from faultlab.events import EventBus
from faultlab.vocabulary.run import ProcessExit, ProcessStart


@dataclass(frozen=True)
class Ending:
    """How a process ended: by itself, or stopped (SIGTERM, and SIGKILL once `grace_s` passed)."""

    code: int  # negative: the signal that ended it
    stopped: bool = False  # it was sent SIGTERM
    killed: bool = False  # it outlived the grace: SIGKILL
    grace_s: float = 0.0
    stop_s: float = 0.0  # from the SIGTERM to its exit

    @property
    def signal_name(self) -> str | None:
        """The signal that ended it (`SIGTERM`), if one did."""
        if self.code >= 0:
            return None
        with contextlib.suppress(ValueError):
            return signal.Signals(-self.code).name
        return f"signal {-self.code}"


class Stoppable(Protocol):
    """A process leading its own session: an asyncio subprocess, or one forked warm."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


async def terminate(proc: Stoppable, grace_s: float) -> Ending:
    """SIGTERM, then SIGKILL after `grace_s`; how the process ended."""
    if proc.returncode is not None:
        return Ending(proc.returncode)
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        # The process leads its own session: its group id is its pid.
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        code = await asyncio.wait_for(proc.wait(), grace_s)
        return Ending(code, stopped=True, grace_s=grace_s, stop_s=time.monotonic() - started)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        code = await proc.wait()
        return Ending(code, stopped=True, killed=True, grace_s=grace_s,
                      stop_s=time.monotonic() - started)


class Member(Protocol):
    """A program running in the lab: a host process in a namespace, or a container."""

    @property
    def pid(self) -> int:
        """Its process on the host (whose /proc/PID/net is its place's network)."""

    @property
    def returncode(self) -> int | None: ...

    @property
    def began(self) -> float | None:
        """When it began (Unix time), where it may have run before it was handed over (a
        forked process runs at once); None: handed over before it could do anything (a program
        being exec'd still starts its interpreter), so `process.start` is stamped then."""

    def describe(self) -> dict[str, Any]:
        """What `process.start` tells of it beyond its role, pid and argv."""

    async def wait(self) -> int: ...

    async def terminate(self, grace_s: float) -> Ending:
        """SIGTERM, then SIGKILL after `grace_s`; how it ended."""


class HostProcess:
    """A process started in a lab namespace, in a session of its own (stopped by its group)."""

    began = None

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def describe(self) -> dict[str, Any]:
        return {}

    async def wait(self) -> int:
        return await self.proc.wait()

    async def terminate(self, grace_s: float) -> Ending:
        return await terminate(self.proc, grace_s)


# The microphone's spare folder (faultlab.mic), where the run folder's path is too long for a
# unix socket; here, beside the rule that finds it a leftover, so that `lab gc` need not import
# the microphone (and numpy).
SPARE_DIR_PREFIX = "faultlab-mic-"
# A browser client's profile and certificate store (faultlab.browser.page).
BROWSER_DIR_PREFIX = "faultlab-browser-"


def leftover_dirs(prefix: str) -> list[Path]:
    """Folders `<prefix><pid>-*` in the temp dir whose process is gone. A pid alone may have
    been reused: then a leftover is spared, never a live run's folder removed."""
    out = []
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        pid = folder.name.removeprefix(prefix).split("-")[0]
        if pid.isdigit() and not running(int(pid)):
            out.append(folder)
    return out


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie: a killed client whose parent died too
    stays one until init reaps it, which this machine's does lazily."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# How a namespace's listeners are asked for: a sock_diag dump of TCP sockets in LISTEN on the
# port (asked for LISTEN only, the kernel walks its listening table only). /proc/PID/net/tcp walks
# the whole established table instead: 5.5 ms a read on this machine with no socket open, so
# polling it and tcp6 every 20 ms took half a core while the target started, on the cores its
# start-up needed; the dump takes 0.1 ms. A kernel without sock_diag is read from /proc.
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_DUMP_REQUEST = 0x301
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_LISTEN = 10
# A UDP socket bound to a port is in state CLOSE (TCP_CLOSE, 7) for sock_diag and /proc.
UDP_BOUND = 7
STATES: dict[Transport, tuple[int, int]] = {"tcp": (socket.IPPROTO_TCP, TCP_LISTEN),
                                            "udp": (socket.IPPROTO_UDP, UDP_BOUND)}


async def listening(pid: int, port: int, transport: Transport = "tcp") -> bool:
    """Whether the network namespace of `pid` has a TCP socket listening on `port` (`udp`: a UDP
    socket bound to it). Asked from a thread made for the question, which enters that namespace;
    a process not yet in a namespace other than faultlab's own (a lab's programs never share it)
    is not listening yet."""
    with ThreadPoolExecutor(1, thread_name_prefix="listening") as asker:
        return await asyncio.get_running_loop().run_in_executor(asker, _listening_in, pid, port,
                                                                transport)


def _listening_in(pid: int, port: int, transport: Transport) -> bool:
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    except OSError:
        return False
    try:
        theirs, ours = os.fstat(fd), os.stat("/proc/self/ns/net")
        if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino):
            return False
        os.setns(fd, os.CLONE_NEWNET)
    finally:
        os.close(fd)
    try:
        return any(_listeners(family, port, transport)
                   for family in (socket.AF_INET, socket.AF_INET6))
    except OSError:
        return _listed(port, transport)


def _listed(port: int, transport: Transport) -> bool:
    """Whether the calling thread's namespace lists a socket of `transport` listening on (bound
    to) `port` in /proc."""
    state = f"{STATES[transport][1]:02X}"
    for table in (transport, f"{transport}6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/thread-self/net/{table}").read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == state and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _listeners(family: int, port: int, transport: Transport) -> int:
    """How many sockets of `family` and `transport` listen on (are bound to) `port` in the calling
    thread's namespace."""
    protocol, state = STATES[transport]
    # struct inet_diag_req_v2, its inet_diag_sockid naming the source port only.
    request = (struct.pack("=BBBBI", family, protocol, 0, 0, 1 << state)
               + struct.pack("!HH", port, 0) + bytes(32) + struct.pack("=III", 0, 0xFFFFFFFF,
                                                                      0xFFFFFFFF))
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_DUMP_REQUEST, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as diag:
        diag.sendto(header + request, (0, 0))
        found = 0
        while True:
            data, offset = diag.recv(65536), 0
            while offset < len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    errno_ = -struct.unpack_from("=i", data, offset + 16)[0]
                    raise OSError(errno_, f"sock_diag: {os.strerror(errno_)}")
                found += 1
                offset += (length + 3) & ~3


READY_POLL_S = 0.02


async def wait_listening(proc: LabProcess, port: int, timeout_s: float, log: Path,
                         transport: Transport = "tcp") -> None:
    """Return once `proc`'s network has a socket listening on `port` (`udp`: bound to it); a
    process that exits or takes longer than `timeout_s` fails the run, pointing at its `log`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await listening(proc.member.pid, port, transport):
        if not proc.alive:
            raise LabError(f"the {proc.role} exited with code {proc.returncode} before listening "
                           f"on port {port}; see {log}")
        if loop.time() > deadline:
            raise LabError(f"the {proc.role} did not listen on port {port} within {timeout_s:g}s;"
                           f" see {log}")
        await asyncio.sleep(READY_POLL_S)


class LabProcess:
    """The client or the target: started in its namespace, its exit put on the event bus."""

    def __init__(self, role: str, member: Member, bus: EventBus, started_at: float) -> None:
        self.role = role
        # When it was started, on the run clock.
        self.started_at = started_at
        self.member = member
        self.bus = bus
        # Set once it has ended, and `process.exit` is on the bus.
        self.ending: Ending | None = None
        self._stopping: asyncio.Task[Ending] | None = None
        self._watch = asyncio.create_task(self._watch_exit())

    @classmethod
    def started(cls, role: str, member: Member, argv: Sequence[str], bus: EventBus) -> LabProcess:
        """`member`, just started as `role` (client, target, proxy), watched from now on; its
        `process.start` precedes whatever it did (the client's windows open there)."""
        start = ProcessStart(role, member.pid, list(argv), member.describe())
        began = None if member.began is None else bus.clock.from_wall(member.began)
        event = bus.record("faultlab", start.name, began, start.fields())
        return cls(role, member, bus, event.t)

    async def _watch_exit(self) -> None:
        code = await self.member.wait()
        # Stopped by the run: only `terminate` knows whether SIGKILL was needed.
        ending = await asyncio.shield(self._stopping) if self._stopping else Ending(code)
        self.ending = ending
        self.bus.announce("faultlab", ProcessExit(
            self.role, ending.code, ending.signal_name,
            True if ending.stopped else None, round(ending.stop_s, 3) if ending.stopped else None,
            True if ending.killed else None, ending.grace_s if ending.killed else None))

    @property
    def returncode(self) -> int | None:
        return self.member.returncode

    @property
    def alive(self) -> bool:
        return self.member.returncode is None

    async def wait(self) -> int:
        await asyncio.shield(self._watch)
        return self.member.returncode if self.member.returncode is not None else -1

    async def stop(self, grace_s: float = 2.0) -> None:
        if self.alive and self._stopping is None:
            # A task of its own: a cancelled stop still ends the process and reports how.
            self._stopping = asyncio.create_task(self.member.terminate(grace_s))
        await asyncio.shield(self._watch)
