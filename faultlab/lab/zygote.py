"""Warm lab processes: a warm job's emulator and proxy forked from a copy of the job taken
before its run began, instead of a new Python that imports them again.

A cold emulator spends ~0.45 s of CPU to listen and a cold proxy ~0.4 s, nearly all of it
imports (the emulator's models, numpy, TLS; mitmproxy), for a run that mostly waits. A suite's
warm server (`faultlab.warm`) has imported them once; each job forks its zygote at its start,
while it is one thread with no event loop, and the run asks it for its emulator and its proxy.
The zygote forks one, which enters its place as `enter.py` does (dies with the zygote, which
dies with the job; the namespace; the lab's /etc files) and runs its module as `python -m`
would. Other lab processes (the client, the user's programs) are started cold as before: only
modules known to read nothing of the job's state at import are forked.

The job and its zygote talk over a socket pair: a request is one datagram carrying the process's
place, argv and environment, with its log and a status socket; on the status socket the zygote
writes the process's pid, then its exit code once it has reaped it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from faultlab.lab.enter import die_with, enter
from faultlab.lab.process import Ending, terminate

# `python -m MODULE ARGS...` forked warm, by the module and the start of its arguments:
# faultlab's own programs (a client that is the user's program starts as the user's would).
FORKED = (("faultlab", ("emulator", "serve")), ("faultlab.proxy", ()),
          ("faultlab.peers.ws_server", ()), ("faultlab.peers.ws_client", ()))
# Variables the forked modules' libraries read once, when imported (websockets' limits): a
# process whose own environment sets one otherwise than the job's starts cold.
READ_AT_IMPORT = ("WEBSOCKETS_",)
_zygote: Zygote | None = None


def fork_zygote() -> None:
    """In a warm job, at its start (one thread, no event loop): fork the job's zygote."""
    global _zygote
    job, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        job.close()
        code = 1
        try:
            code = _serve(zygote, os.getppid())
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    zygote.close()
    _zygote = Zygote(job, pid)


def forked_module(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The module of a `python -m` command line to fork warm with `env`, or None."""
    if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m":
        return None
    if any(env.get(k) != os.environ.get(k) for k in {*env, *os.environ}
           if k.startswith(READ_AT_IMPORT)):
        return None
    module, args = argv[2], tuple(argv[3:])
    return module if any(module == m and args[:len(a)] == a for m, a in FORKED) else None


def current() -> Zygote | None:
    """This process's zygote, when it is a warm job."""
    return _zygote


class Zygote:
    """The job's side: asks for a lab process, gets a `ForkedProcess`."""

    def __init__(self, control: socket.socket, pid: int) -> None:
        self.control = control
        self.pid = pid

    async def start(self, netns: Path, etc: Path | None, argv: Sequence[str],
                    env: Mapping[str, str], log: Path) -> ForkedProcess:
        module = forked_module(argv, env)
        assert module is not None, argv
        ours, theirs = socket.socketpair()
        request = {"netns": str(netns), "etc": str(etc or "-"), "module": module,
                   "argv": [module, *argv[3:]], "env": dict(env)}
        try:
            with theirs, log.open("ab") as out:
                socket.send_fds(self.control, [json.dumps(request).encode()],
                                [theirs.fileno(), out.fileno()])
            reader, writer = await asyncio.open_unix_connection(sock=ours)
        except BaseException:
            ours.close()
            raise
        line = await reader.readline()
        if not line:
            writer.close()
            raise OSError(f"the zygote did not start {module}")
        return ForkedProcess(int(line), reader, writer)


class ForkedProcess:
    """A lab process forked by the zygote, in a session of its own (stopped by its group); its
    exit code comes from the zygote, which reaped it."""

    def __init__(self, pid: int, status: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self._pid = pid
        self._status = status
        self._writer = writer
        self._code: int | None = None
        self._ended: asyncio.Task[int] | None = None

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._code

    def describe(self) -> dict[str, Any]:
        return {"forked": True}

    async def wait(self) -> int:
        if self._ended is None:
            self._ended = asyncio.ensure_future(self._read_code())
        return await asyncio.shield(self._ended)

    async def _read_code(self) -> int:
        line = await self._status.readline()
        self._writer.close()
        # No line: the zygote is gone, and its processes with it (they die with it).
        self._code = int(line) if line else -signal.SIGKILL
        return self._code

    async def terminate(self, grace_s: float) -> Ending:
        return await terminate(self, grace_s)


def _serve(control: socket.socket, job: int) -> int:
    """The zygote: fork a lab process per request, and write each one's exit code once reaped,
    until the job closes its end (it ended) or dies (SIGKILL, by the death signal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the job's Ctrl-C is the job's to handle
    die_with(job)
    # What the job imported stays put: a forked process's collections then neither walk nor
    # copy the job's objects.
    gc.collect()
    gc.freeze()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    status: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([control.fileno(), wake_r], [], [])
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
            _reap(status)
        if control.fileno() in ready:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 2)
            if not message:
                return 0
            told, log = socket.socket(fileno=fds[0]), fds[1]
            pid = os.fork()
            if pid == 0:
                ours = [control.fileno(), wake_r, wake_w, told.fileno(),
                        *(s.fileno() for s in status.values())]
                _become(json.loads(message), log, ours, os.getppid())
            os.close(log)
            with contextlib.suppress(OSError):
                told.sendall(f"{pid}\n".encode())
            status[pid] = told


def _reap(status: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, how = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        told = status.pop(pid, None)
        if told is not None:
            with contextlib.suppress(OSError):
                told.sendall(f"{os.waitstatus_to_exitcode(how)}\n".encode())
            told.close()


def _become(request: dict[str, Any], log: int, zygotes: Sequence[int], zygote: int) -> NoReturn:
    """In the forked lab process: its own session, its place, its output to `log`, then its
    module as `python -m` runs it. `zygotes`: the zygote's descriptors, closed here."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in zygotes:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        atexit._clear()  # the job's, not this process's
        enter(zygote, request["netns"], request["etc"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    """As the interpreter turns a SystemExit into an exit code (a message: printed, 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1
