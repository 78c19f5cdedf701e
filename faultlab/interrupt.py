"""SIGINT and SIGTERM at any moment of a command: what exists is torn down, and the command exits
128 + the signal's number (130 for SIGINT, 143 for SIGTERM).

`catch` is the command's first instruction (faultlab.__main__, the installed command's entry and
`python -m faultlab`'s, calls it before click, asyncio and the runner are imported: the runner
alone takes ~1.7 s). From then on the first signal is noted, and what it does depends
on the moment:

- before a run's event loop nothing needs tearing down: it raises `Interrupted`, which unwinds the
  command (a KeyboardInterrupt would be turned by click into "Aborted!" and exit 1, the code of a
  failed expectation);
- while `cancel_on_signal` awaits the runs, it cancels that task once; teardown awaits its steps
  `uncancelled`, so it is never cut halfway, and later signals change nothing;
- after, it is only noted, so that a report being written is written whole.

`finish` is the command's last instruction. Python's exit callbacks still run (signals noted), then
the process ends in the last of them, registered by `catch`: with the command's code, or the
signal's if one came by then, and without the interpreter's finalization, which tears modules
down for about half a second with both signals back at their default action or ignored (a
signal then killed the process, or was lost and the command exited 0). After its last look a
signal ends the process by its default action: never 0 or 1. `announce` says so once on stderr,
wherever the signal fell (one noted while the reports were written exits with its code too).
Light to import on purpose: only `atexit`, `contextlib`, `os`, `signal` and `sys` at the top.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import asyncio
    import socket
    from collections.abc import Awaitable, Callable, Iterator
    from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: int | None = None
_announced = False
_raising = False
_cancel: Callable[[], None] | None = None
_ending = False  # `_end` is registered
_finished: tuple[str | int | None] | None = None  # the code `finish` was given


class Interrupted(BaseException):
    """A signal came before the run's event loop: unwinds the command. A BaseException, so that
    no `except Exception` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def describe() -> str:
    """The first signal's name (`SIGINT`), for messages."""
    return signal.Signals(_received).name if _received is not None else "no signal"


def announce(done: str = "") -> None:
    """`faultlab: interrupted by SIGINT; <done>` on stderr, once, if a signal came."""
    global _announced
    if _received is None or _announced:
        return
    _announced = True
    sys.stderr.write(f"faultlab: interrupted by {describe()}" + (f"; {done}" if done else "") + "\n")
    sys.stderr.flush()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _received, _raising
    if _received is not None:
        return
    _received = signum
    if _cancel is not None:
        _cancel()
    elif _raising:
        _raising = False
        raise Interrupted(signum)


def catch() -> None:
    """Take SIGINT and SIGTERM over; from now on a signal is noted (also one held across the
    re-exec into a user namespace, delivered here). Calling it again changes nothing."""
    global _ending
    for sig in SIGNALS:
        signal.signal(sig, _on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    if not _ending:
        # The first exit callback registered is the last called: the others run before it.
        atexit.register(_end)
        _ending = True


def raise_from_now() -> None:
    """From now on the first signal raises `Interrupted` (at once, if one came already)."""
    global _raising
    if _received is not None:
        raise Interrupted(_received)
    _raising = True


def note_only() -> None:
    """From now on a signal is only noted."""
    global _raising
    _raising = False


def hold() -> None:
    """Hold both signals in this thread: they stay pending, across an exec too, until `catch`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def finish(code: str | int | None) -> NoReturn:
    """End the command with `code` (as `sys.exit` takes it), or with 128 + the first signal's
    number if one comes before the process is gone (see the module's docstring)."""
    global _finished
    note_only()
    _finished = (code,)
    sys.exit(code)


def _end() -> None:
    """The last exit callback: exit with `finish`'s code, or the signal's, here and now; does
    nothing when the command did not end through `finish` (a Python of a test's own)."""
    global _received
    if _finished is None:
        return
    code = _finished[0]
    status = 0 if code is None else code if isinstance(code, int) else 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # closed, or a pipe whose reader has gone
            stream.flush()
    with _wakeup() as wake:
        # From here a signal takes its default action, ending the process. One delivered to
        # another thread before (numpy's BLAS starts its own) may not have reached its Python
        # handler: the wakeup socket tells it.
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        with contextlib.suppress(OSError):
            late = [n for n in wake.recv(512) if n in SIGNALS]
            if _received is None and late:
                _received = late[0]
    if _received is not None:
        status = 128 + _received
        announce("it came as the command ended; what it wrote is whole")
    os._exit(status)


async def cancel_on_signal[T](work: Awaitable[T]) -> T:
    """Await `work` in the current task, which the first signal cancels, once (one noted before
    cancels it at its first step)."""
    import asyncio

    global _cancel
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel() -> None:
        # Called by the handler, between two bytecodes of whatever runs: hand it to the loop.
        # A closing loop raises RuntimeError: noting the signal is then all that is left.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)

    _cancel = cancel
    note_only()
    try:
        # A signal delivered to a worker thread would leave the loop asleep until its next
        # timer: the wakeup socket wakes it, and the handler then runs in the main thread.
        with _wakeup() as wake:
            loop.add_reader(wake.fileno(), _drain, wake)
            try:
                if _received is not None:
                    cancel()
                return await work
            finally:
                loop.remove_reader(wake.fileno())
    finally:
        _cancel = None


@contextlib.contextmanager
def _wakeup() -> Iterator[socket.socket]:
    """A socket that receives the number of each signal delivered meanwhile, to whichever
    thread (Python's C-level handler writes it before the Python handler runs)."""
    import socket

    wake, writer = socket.socketpair()
    with wake, writer:
        wake.setblocking(False)
        writer.setblocking(False)
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        try:
            yield wake
        finally:
            signal.set_wakeup_fd(previous)


def _drain(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while sock.recv(512):
            pass


async def uncancelled[T](work: Awaitable[T]) -> T:
    """Await `work` to its end even if this task is cancelled meanwhile (a thread, or a teardown,
    cannot be stopped halfway); the cancellation is raised once it has ended."""
    import asyncio

    inner: asyncio.Future[T] = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(inner)
        except asyncio.CancelledError:
            if inner.done():
                raise
            cancelled = True
            continue
        except BaseException as exc:
            if cancelled:
                raise asyncio.CancelledError() from exc
            raise
        if cancelled:
            raise asyncio.CancelledError()
        return result
