"""Processes started inside lab namespaces, watched, and stopped by their own PID."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from faultlab.errors import LabError
from faultlab.events import EventBus
from faultlab.lab.namespace import Namespace

ENTER = Path(__file__).with_name("enter.py")


async def spawn(
    ns: Namespace,
    argv: Sequence[str],
    env: Mapping[str, str],
    hosts: Path | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
) -> asyncio.subprocess.Process:
    """Start `argv` inside `ns` (with `hosts` as its /etc/hosts), in a session of its own."""
    command = [sys.executable, "-I", "-S", str(ENTER), str(os.getpid()), str(ns.path),
               str(hosts or "-"), "--", *argv]
    try:
        return await asyncio.create_subprocess_exec(
            *command, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout, stderr=stderr, start_new_session=True,
        )
    except OSError as exc:
        raise LabError(f"cannot start {argv[0]!r} in {ns.role}: {exc}") from None


async def terminate(proc: asyncio.subprocess.Process, grace_s: float) -> int:
    """SIGTERM, then SIGKILL after `grace_s`; returns the exit status (negative: the signal)."""
    if proc.returncode is not None:
        return proc.returncode
    with contextlib.suppress(ProcessLookupError):
        # The process leads its own session: its group id is its pid.
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return await proc.wait()


def listening(pid: int, port: int) -> bool:
    """Whether the network namespace of `pid` has a TCP socket listening on `port`."""
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False



class LabProcess:
    """The client or the target: started in its namespace, its exit put on the event bus."""

    def __init__(self, role: str, proc: asyncio.subprocess.Process, bus: EventBus) -> None:
        self.role = role
        self.proc = proc
        self.bus = bus
        self.stopped_by_run = False
        self._watch = asyncio.create_task(self._watch_exit())

    @classmethod
    async def start(
        cls, role: str, ns: Namespace, argv: Sequence[str], env: Mapping[str, str],
        hosts: Path | None, log: Path, bus: EventBus,
    ) -> LabProcess:
        with log.open("ab") as out:
            proc = await spawn(ns, argv, env, hosts, stdout=out, stderr=asyncio.subprocess.STDOUT)
        bus.emit("faultlab", "process.start", role=role, pid=proc.pid, argv=list(argv))
        return cls(role, proc, bus)

    async def _watch_exit(self) -> None:
        code = await self.proc.wait()
        fields: dict[str, Any] = {"role": self.role, "code": code}
        if code < 0:
            fields["signal"] = signal.Signals(-code).name
        if self.stopped_by_run:
            fields["stopped_by_run"] = True
        self.bus.emit("faultlab", "process.exit", **fields)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def wait(self) -> int:
        await asyncio.shield(self._watch)
        return self.proc.returncode if self.proc.returncode is not None else -1

    async def stop(self, grace_s: float = 2.0) -> None:
        if self.alive:
            self.stopped_by_run = True
            await terminate(self.proc, grace_s)
        await asyncio.shield(self._watch)
