"""Which lab processes a warm job forks (faultlab.lab.zygote), their exit codes as the
interpreter would give them, and a start cancelled once asked for, against a zygote played by
the test; the forking itself is tests/lab/test_zygote.py's."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from faultlab.lab.zygote import ForkedProcess, Zygote, ZygoteGone, _exit_code, forked_module

PY = sys.executable


@pytest.mark.parametrize(("argv", "module"), [
    ([PY, "-m", "faultlab", "emulator", "serve", "--host", "198.18.0.2"], "faultlab"),
    ([PY, "-m", "faultlab.proxy", "--port", "8080"], "faultlab.proxy"),
    ([PY, "-m", "faultlab.peers.ws_server"], "faultlab.peers.ws_server"),
    ([PY, "-m", "faultlab.peers.ws_client", "--duration", "6s"], "faultlab.peers.ws_client"),
    # faultlab's other commands, a reference client (the user's program's stand-in), another
    # Python, a program.
    ([PY, "-m", "faultlab", "emulator", "record"], None),
    ([PY, "-m", "faultlab.clients.naive"], None),
    (["/usr/bin/python3", "-m", "faultlab.proxy"], None),
    ([PY, "client.py"], None),
    (["node", "client.mjs"], None),
    ([PY, "-m"], None),
])
def test_faultlab_s_own_lab_programs_are_forked(argv: list[str], module: str | None) -> None:
    assert forked_module(argv, dict(os.environ), dict(os.environ)) == module


def test_a_process_that_sets_what_a_library_reads_at_import_otherwise_starts_cold() -> None:
    """websockets reads its limits when imported: a peer whose environment sets one otherwise
    than the zygote's modules were imported with would not see it if forked; other variables
    are read when used."""
    argv = [PY, "-m", "faultlab.peers.ws_client"]
    limit = {"WEBSOCKETS_MAX_LINE_LENGTH": "99999"}
    assert forked_module(argv, {"PATH": "/bin"}, {"PATH": "/usr/bin"}) == argv[2]
    assert forked_module(argv, limit, {}) is None
    assert forked_module(argv, {}, limit) is None
    assert forked_module(argv, limit, limit) == argv[2]


@pytest.mark.parametrize(("code", "exit_code", "printed"), [
    (None, 0, ""), (0, 0, ""), (3, 3, ""), (256 + 7, 7, ""), ("bad input", 1, "bad input\n")])
def test_an_exit_is_the_code_the_interpreter_would_give(
        code: int | str | None, exit_code: int, printed: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(SystemExit(code)) == exit_code
    assert capsys.readouterr().err == printed


ECHO = [sys.executable, "-m", "faultlab.peers.ws_server"]


async def asked(zygote: Zygote, played: socket.socket, folder: Path
                ) -> tuple[asyncio.Task[ForkedProcess | None], bytes, list[int]]:
    """A start of the echo server under way, and the request the zygote played by `played`
    received: its message and its descriptors (the status socket, the log)."""
    start = asyncio.create_task(zygote.start(folder / "netns", None, ECHO, dict(os.environ),
                                             folder / "server.log"))
    message, fds, _, _ = await asyncio.get_running_loop().run_in_executor(
        None, socket.recv_fds, played, 1 << 16, 2)
    return start, message, fds


def test_a_start_cancelled_once_asked_for_stops_what_was_forked(tmp_path: Path) -> None:
    """A run cancelled (Ctrl-C) while its zygote forks the echo server: the process is forked
    anyway, so the start waits for its pid, stops it, and only then is cancelled."""
    ours, played = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    async def go() -> int:
        start, request, fds = await asked(Zygote(ours, pid=0), played, tmp_path)
        assert b"faultlab.peers.ws_server" in request
        status = socket.socket(fileno=fds[0])
        os.close(fds[1])
        start.cancel()
        await asyncio.sleep(0.05)
        forked = subprocess.Popen(["sleep", "60"], start_new_session=True)
        try:
            status.sendall(f"{forked.pid}\n".encode())
            code = await asyncio.get_running_loop().run_in_executor(None, forked.wait, 10)
            status.sendall(f"{code}\n".encode())
            with pytest.raises(asyncio.CancelledError):
                await start
        finally:
            forked.kill()  # left running only if the start did not stop it
            forked.wait()
        return code

    assert asyncio.run(go()) == -signal.SIGTERM


def test_a_request_the_zygote_fails_is_started_cold_and_a_dead_zygote_is_said_gone(
        tmp_path: Path) -> None:
    """The zygote closes a request's status socket without a pid (its fork failed): the start
    gives None, the process to start cold; with the zygote's end closed, the start says it
    is gone."""
    ours, played = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zygote = Zygote(ours, pid=0)

    async def go() -> None:
        start, _, fds = await asked(zygote, played, tmp_path)
        for fd in fds:
            os.close(fd)
        assert await start is None
        played.close()
        with pytest.raises(ZygoteGone):
            await zygote.start(tmp_path / "netns", None, ECHO, dict(os.environ),
                               tmp_path / "server.log")

    asyncio.run(go())
