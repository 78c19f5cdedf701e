"""Processes started inside lab namespaces, watched, and stopped by their own PID."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faultlab.errors import LabError
from faultlab.events import EventBus
from faultlab.lab.base import Lab, Role


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



READY_POLL_S = 0.02


async def wait_listening(proc: LabProcess, port: int, timeout_s: float, log: Path) -> None:
    """Return once `proc`'s network has a socket listening on `port`; a process that exits or
    takes longer than `timeout_s` fails the run, pointing at its `log`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not listening(proc.proc.pid, port):
        if not proc.alive:
            raise LabError(f"the {proc.role} exited with code {proc.returncode} before listening "
                           f"on port {port}; see {log}")
        if loop.time() > deadline:
            raise LabError(f"the {proc.role} did not listen on port {port} within {timeout_s:g}s;"
                           f" see {log}")
        await asyncio.sleep(READY_POLL_S)


class LabProcess:
    """The client or the target: started in its namespace, its exit put on the event bus."""

    def __init__(self, role: str, proc: asyncio.subprocess.Process, bus: EventBus,
                 started_at: float) -> None:
        self.role = role
        # When it was started, on the run clock.
        self.started_at = started_at
        self.proc = proc
        self.bus = bus
        self.stopped_by_run = False
        self._watch = asyncio.create_task(self._watch_exit())

    @classmethod
    async def start(
        cls, role: str, lab: Lab, where: Role, argv: Sequence[str], env: Mapping[str, str],
        hosts: Path | None, log: Path, bus: EventBus,
    ) -> LabProcess:
        """Start `argv` as `role` (client, target, proxy) in the lab's `where`, output to `log`."""
        with log.open("ab") as out:
            proc = await lab.spawn(where, argv, env, hosts, stdout=out,
                                   stderr=asyncio.subprocess.STDOUT)
        started = bus.emit("faultlab", "process.start", role=role, pid=proc.pid, argv=list(argv))
        return cls(role, proc, bus, started.t)

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
