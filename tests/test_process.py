"""A process's `process.exit` says whether it exited, was stopped, or had to be killed; whether a
lab's program listens on its port."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Any

import pytest

from faultlab.events import EventBus, RunClock
from faultlab.lab import process
from faultlab.lab.process import Ending, HostProcess, LabProcess

# Ready once it has printed a line, so a signal never lands before its handler is set.
EXITS_ON_SIGTERM = "import signal, sys, time; print(flush=True); time.sleep(30)"
IGNORES_SIGTERM = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                   " print(flush=True); time.sleep(30)")
EXITS_AT_ONCE = "import sys; sys.exit(3)"


async def run(code: str, grace_s: float) -> tuple[Ending | None, dict[str, Any]]:
    bus = EventBus(RunClock())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE, start_new_session=True)
    process = LabProcess("target", HostProcess(proc), bus, 0.0)
    assert proc.stdout is not None
    await proc.stdout.readline()
    await asyncio.sleep(0.1)  # the one that exits at once has exited
    await process.stop(grace_s)
    (exit_event,) = [e for e in bus.events if e.name == "process.exit"]
    return process.ending, exit_event.fields


def test_a_process_that_exits_on_sigterm_is_stopped_not_killed() -> None:
    """SIGTERM ends it within the grace: `stopped_by_run`, no `killed`, and how long it took."""
    ending, fields = asyncio.run(run(EXITS_ON_SIGTERM, 2.0))
    assert ending is not None and ending.stopped and not ending.killed
    assert fields["stopped_by_run"] is True and fields["signal"] == "SIGTERM"
    assert "killed" not in fields


def test_a_process_that_outlives_the_grace_is_killed() -> None:
    """One that ignores SIGTERM is SIGKILLed after the grace, and its exit event says so."""
    ending, fields = asyncio.run(run(IGNORES_SIGTERM, 0.3))
    assert ending is not None
    assert ending == Ending(-9, stopped=True, killed=True, grace_s=0.3, stop_s=ending.stop_s)
    assert ending.stop_s >= 0.3  # the grace, then the kill
    assert fields["killed"] is True and fields["grace_s"] == 0.3
    assert fields["signal"] == "SIGKILL" and fields["stopped_by_run"] is True


def test_a_process_that_exited_by_itself_was_not_stopped() -> None:
    """Stopping a process that already exited sends nothing and reports its own exit code."""
    ending, fields = asyncio.run(run(EXITS_AT_ONCE, 2.0))
    assert ending == Ending(3)
    assert fields == {"role": "target", "code": 3}


@pytest.mark.parametrize(("family", "host"), [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_a_listener_is_found_by_its_port_and_only_by_it(family: int, host: str) -> None:
    """The sock_diag dump (and the /proc table it replaces) finds a socket listening on the port,
    in this thread's namespace, and nothing on a port no socket listens on."""
    with socket.socket(family, socket.SOCK_STREAM) as server:
        server.bind((host, 0))
        port = server.getsockname()[1]
        assert process._listeners(family, port, "tcp") == 0 and not process._listed(port, "tcp")
        server.listen()
        assert process._listeners(family, port, "tcp") == 1 and process._listed(port, "tcp")
        other = port + 1 if port < 65535 else port - 1
        assert process._listeners(family, other, "tcp") == 0
        assert process._listeners(family, port, "udp") == 0 and not process._listed(port, "udp")


@pytest.mark.parametrize(("family", "host"), [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_a_bound_udp_socket_is_found_by_its_port_and_only_by_it(family: int, host: str) -> None:
    """For UDP (a TURN server's listener), a socket bound to the port is what listens: found by
    the dump and in /proc, and not as a TCP listener."""
    with socket.socket(family, socket.SOCK_DGRAM) as server:
        server.bind((host, 0))
        port = server.getsockname()[1]
        assert process._listeners(family, port, "udp") == 1 and process._listed(port, "udp")
        assert process._listeners(family, port, "tcp") == 0 and not process._listed(port, "tcp")
    assert process._listeners(family, port, "udp") == 0


def test_a_process_still_in_faultlabs_namespace_is_not_listening() -> None:
    """A lab's program not yet in its namespace (the helper that enters it has not) is not
    listening, whatever listens here."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        async def ask() -> bool:
            return await process.listening(os.getpid(), server.getsockname()[1])

        assert asyncio.run(ask()) is False
