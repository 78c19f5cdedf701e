"""Warm lab processes: faultlab's own lab programs (the emulator, the proxy, the peers) forked
from a copy of the process that runs the lab, taken before its run began, instead of a new
Python that imports them again.

A cold emulator spends ~0.45 s of CPU to listen and a cold proxy ~0.4 s, nearly all of it
imports (the emulator's models, numpy, TLS; mitmproxy), much of it what faultlab's own process
has imported already. The process that runs a lab (`faultlab run`, a suite's warm job) forks its
zygote at its start, while it is one thread with no event loop. The zygote imports what a
program needs when it is first asked for it (a suite's warm server, `faultlab.warm`, has
imported them all once for its jobs) and forks it; the forked process enters its place as
`enter.py` does (it dies with the zygote, which dies with its parent; the namespace; the lab's
/etc files) and runs its module as `python -m` would. The client that is the user's program,
and every other lab process, starts cold as before.

What a library reads from the environment when imported is the parent's, not the process's:
mitmproxy's key log is set again at the proxy's start, and a process whose environment sets
websockets' limits otherwise than the zygote's modules were imported with starts cold.

The parent and its zygote talk over a socket pair: a request is one datagram carrying the
process's place, argv, environment and imports, with its log and a status socket; on the status
socket the zygote writes the process's pid once it leads a session of its own, then its exit code
once it has reaped it. A request the zygote fails is started cold; a zygote that died is
forgotten, and the next processes start cold.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from faultlab.interrupt import uncancelled
from faultlab.lab.enter import die_with, enter
from faultlab.lab.process import Ending, terminate

# `python -m MODULE ARGS...` forked warm, by the module and the start of its arguments, with
# what the zygote imports before it forks one (found with `python -X importtime`; a suite's warm
# server has imported them all): faultlab's own programs. A client that is the user's program
# (or a reference client standing for one) starts as the user's would.
FORKED: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {
    ("faultlab", ("emulator", "serve")): (
        "faultlab.commands.emulator", "faultlab.emulator.run", "faultlab.emulator.personality",
        "faultlab.scenarios.booking.pack", "faultlab.cassette.format"),
    ("faultlab.proxy", ()): ("faultlab.proxy.warm",),
    ("faultlab.peers.ws_server", ()): ("faultlab.peers.ws_server",),
    ("faultlab.peers.ws_client", ()): ("faultlab.peers.ws_client",),
}
# Signals the zygote leaves to its parent (its forked processes get their defaults back).
IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Variables the forked modules' libraries read once, when imported (websockets' limits): a
# process whose own environment sets one otherwise than its parent's starts cold.
READ_AT_IMPORT = ("WEBSOCKETS_",)
_zygote: Zygote | None = None


def fork_zygote() -> None:
    """Before this process runs labs (one thread, no event loop): fork its zygote, once."""
    if _zygote is not None:
        return
    parent, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sys.stdout.flush()
    sys.stderr.flush()
    here = os.getpid()
    pid = os.fork()
    if pid == 0:
        parent.close()
        _live(zygote, here)
    zygote.close()
    _adopt(parent, pid)


def spawn_zygote() -> None:
    """Where forking this process is unsafe (a pytest-xdist worker has an I/O thread): start a
    zygote in a new Python, which imports what its processes need when first asked, once.
    From a thread that lives as long as this process (the zygote dies with it)."""
    if _zygote is not None:
        return
    parent, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with zygote:
        os.set_inheritable(zygote.fileno(), True)
        pid = os.posix_spawn(sys.executable, [
            sys.executable, "-c", "from faultlab.lab.zygote import serve; "
            f"serve({zygote.fileno()}, {os.getpid()})"],
            os.environ, file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)])
    _adopt(parent, pid)


def serve(control_fd: int, parent: int) -> None:
    """A spawned zygote's life (`spawn_zygote`)."""
    os.set_inheritable(control_fd, False)
    _live(socket.socket(fileno=control_fd), parent)


def _adopt(control: socket.socket, pid: int) -> None:
    """This process's zygote from now on, closed at this process's exit."""
    global _zygote
    _zygote = Zygote(control, pid)
    atexit.unregister(close_zygote)  # once, however many zygotes it has had
    atexit.register(close_zygote)


def _live(control: socket.socket, parent: int) -> NoReturn:
    """The zygote's life, to its exit."""
    code = 1
    try:
        code = _serve(control, parent)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def close_zygote() -> None:
    """This process's zygote ended and reaped (at this process's exit): nothing outlives it."""
    global _zygote
    if _zygote is not None:
        _zygote.close()
        _zygote = None


def forked_module(argv: Sequence[str], env: Mapping[str, str],
                  imported_with: Mapping[str, str]) -> str | None:
    """The module of a `python -m` command line to fork warm with `env` from a zygote whose
    modules were imported with the environment `imported_with`, or None."""
    return None if _imports(argv, env, imported_with) is None else argv[2]


def _imports(argv: Sequence[str], env: Mapping[str, str],
             imported_with: Mapping[str, str]) -> tuple[str, ...] | None:
    """What to import before forking `argv` with `env` (None: start it cold)."""
    if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m":
        return None
    if any(env.get(k) != imported_with.get(k) for k in {*env, *imported_with}
           if k.startswith(READ_AT_IMPORT)):
        return None
    module, args = argv[2], tuple(argv[3:])
    return next((imports for (m, a), imports in FORKED.items()
                 if module == m and args[:len(a)] == a), None)


def preloaded() -> list[str]:
    """Every module a forked process needs: a suite's warm server imports them once."""
    return list(dict.fromkeys(name for imports in FORKED.values() for name in imports))


def current() -> Zygote | None:
    """This process's zygote, once forked."""
    return _zygote


class ZygoteGone(OSError):
    """The zygote is gone (it died, and what it forked with it): later processes start cold."""


class Zygote:
    """The parent's side: asks for a lab process, gets a `ForkedProcess`. `environ`: the
    environment its modules were imported with (the parent's when it was made)."""

    def __init__(self, control: socket.socket, pid: int) -> None:
        self.control = control
        self.pid = pid
        self.environ = dict(os.environ)

    def forks(self, argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether it forks `argv` with `env` (else it is started cold)."""
        return forked_module(argv, env, self.environ) is not None

    def close(self, grace_s: float = 2.0) -> None:
        """Close its end, so that it exits, and reap it (killed if it has not gone in
        `grace_s`: the processes it forked then die with it)."""
        self.control.close()
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(ChildProcessError):  # reaped already
            while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    return
                time.sleep(0.005)

    async def start(self, netns: Path, etc: Path | None, argv: Sequence[str],
                    env: Mapping[str, str], log: Path) -> ForkedProcess | None:
        """The process forked in the namespace at `netns` (seeing the files of the folder `etc`
        over /etc's), its output appended to `log`; None when this request failed in the
        zygote (its output says why), to be started cold."""
        imports = _imports(argv, env, self.environ)
        assert imports is not None, argv
        request = {"netns": str(netns), "etc": str(etc or "-"), "imports": imports,
                   "module": argv[2], "argv": [argv[2], *argv[3:]], "env": dict(env)}
        ours, theirs = socket.socketpair()
        with theirs:
            try:
                reader, writer = await asyncio.open_unix_connection(sock=ours)
            except BaseException:
                ours.close()
                raise
            try:
                with log.open("ab") as out:
                    asked = time.time()
                    try:
                        socket.send_fds(self.control, [json.dumps(request).encode()],
                                        [theirs.fileno(), out.fileno()])
                    except OSError as exc:
                        raise ZygoteGone(f"the zygote is gone: {exc.strerror}") from None
            except OSError:
                writer.close()
                raise
        # From here on the process is forked, whatever happens to this task.
        told = asyncio.ensure_future(reader.readline())
        try:
            line = await asyncio.shield(told)
        except asyncio.CancelledError:
            # Stopped here rather than left running.
            line = await uncancelled(told)
            if line:
                await uncancelled(ForkedProcess(int(line), asked, reader, writer).terminate(0.0))
            else:
                writer.close()
            raise
        if not line:
            writer.close()
            return None
        return ForkedProcess(int(line), asked, reader, writer)


class ForkedProcess:
    """A lab process forked by the zygote, in a session of its own (stopped by its group); its
    exit code comes from the zygote, which reaped it. It runs from its fork on, before the run
    knows its pid: it `began` when it was asked for."""

    def __init__(self, pid: int, began: float, status: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.pid = pid
        self.began = began
        self._status = status
        self._writer = writer
        self._code: int | None = None
        self._ended: asyncio.Task[int] | None = None

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


def _serve(control: socket.socket, parent: int) -> int:
    """The zygote: fork a lab process per request, and write each one's exit code once reaped,
    until the parent closes its end (it ended) or dies (SIGKILL, by the death signal)."""
    # A signal to the parent's process group is the parent's to handle (a Ctrl-C, a CI's
    # SIGTERM): the zygote ending then would kill the programs its parent is tearing down.
    for signum in IGNORED:
        signal.signal(signum, signal.SIG_IGN)
    die_with(parent)
    # What the parent made stays put: a forked process's collections then neither walk nor
    # copy its objects (no collection first: it took 53 ms of a run's parent's heap).
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
            told = socket.socket(fileno=fds[0])
            try:
                pid = _fork(json.loads(message), fds[1], told,
                            [control.fileno(), wake_r, wake_w, *(s.fileno() for s in status.values())])
            except Exception:  # this request fails (its start is told so), not the zygote
                traceback.print_exc()
                told.close()
                continue
            finally:
                os.close(fds[1])
            with contextlib.suppress(OSError):
                told.sendall(f"{pid}\n".encode())
            status[pid] = told


def _fork(request: dict[str, Any], log: int, told: socket.socket, ours: list[int]) -> int:
    """Fork the requested process; its pid once it leads a session of its own (a group to
    stop it by)."""
    # Once for the zygote's life (a warm job's were imported by the suite's server).
    for name in request["imports"]:
        with contextlib.suppress(Exception):  # the process meets it, and logs why
            importlib.import_module(name)
    gc.freeze()
    zygote = os.getpid()
    led_r, led_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        _become(request, log, [*ours, told.fileno(), led_r], led_w, zygote)
    os.close(led_w)
    try:
        os.read(led_r, 1)  # end of file: it has called setsid, or it has died
    finally:
        os.close(led_r)
    return pid


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


def _become(request: dict[str, Any], log: int, zygotes: Sequence[int], led: int,
            zygote: int) -> NoReturn:
    """In the forked lab process: its own session (told by closing `led`), its place, its
    output to `log`, then its module as `python -m` runs it. `zygotes`: the zygote's
    descriptors, closed here (those the parent had open stay, as its Python objects own them:
    closed under them, a descriptor this process reuses could be closed by one of them)."""
    code = 1
    try:
        os.setsid()
        os.close(led)
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, *IGNORED):
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
        atexit._clear()  # the parent's, not this process's
        enter(zygote, request["netns"], request["etc"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        # The zygote imported the module on purpose: runpy's warning that it did is noise.
        warnings.filterwarnings("ignore", r".*found in sys\.modules after import of package",
                                RuntimeWarning)
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
