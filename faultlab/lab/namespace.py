"""A network namespace with a thread of its own living in it.

`setns` and `unshare(CLONE_NEWNET)` change only the calling thread's namespace, and a process
forked from that thread starts in it: so one asyncio process drives several namespaces, each
through its own worker thread, and `iptables-restore` run from that thread needs no `nsenter`.
Synchronous pyroute2 calls also belong in a worker thread (inside a running event loop they fail).
Creating a namespace this way needs no fork (pyroute2's `netns.create` forks, which is unsafe in a
threaded process).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from pyroute2 import IPRoute

from faultlab.errors import LabError

ENTER = Path(__file__).with_name("enter.py")
MS_BIND = 0x1000
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


class Namespace:
    """A named network namespace, bound at `path`, and the worker thread that lives in it."""

    def __init__(self, role: str, path: Path) -> None:
        self.role = role
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ns-{role}")

    @classmethod
    def create(cls, role: str, path: Path) -> Namespace:
        """A new namespace bound at `path`; fails with FileExistsError if the name is taken."""
        ns = cls(role, path)
        try:
            ns.call(_create_here, path)
        except BaseException:
            ns.close()
            raise
        return ns

    @classmethod
    def bind(cls, role: str, path: Path, source: Path) -> Namespace:
        """The network namespace at `source` (another process's `/proc/PID/ns/net`: a
        container's) bound at `path` too, so that it keeps the lab's name and outlives that
        process until teardown; fails with FileExistsError if the name is taken."""
        ns = cls(role, path)
        try:
            ns.call(_bind_here, source, path)
        except BaseException:
            ns.close()
            raise
        return ns

    @property
    def name(self) -> str:
        return self.path.name

    def call[T](self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(*args)` in the namespace and wait for it (for code outside the event loop)."""
        return self._executor.submit(fn, *args).result()

    async def run[T](self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(*args)` in the namespace without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    async def set_link_state(self, ifname: str, up: bool) -> None:
        await self.run(_set_link_state, ifname, up)

    async def spawn(self, argv: Sequence[str], env: Mapping[str, str], etc: Path | None = None,
                    stdout: int | IO[Any] | None = None,
                    stderr: int | IO[Any] | None = None) -> asyncio.subprocess.Process:
        """Start `argv` inside the namespace (seeing the files of the folder `etc` over /etc's),
        in a session of its own."""
        command = [sys.executable, "-I", "-S", str(ENTER), str(os.getpid()), str(self.path),
                   str(etc or "-"), "--", *argv]
        try:
            return await asyncio.create_subprocess_exec(
                *command, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout, stderr=stderr, start_new_session=True,
            )
        except OSError as exc:
            raise LabError(f"cannot start {argv[0]!r} in {self.role}: {exc}") from None

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _create_here(path: Path) -> None:
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    _name_here(Path("/proc/thread-self/ns/net"), path, enter=lambda: os.unshare(os.CLONE_NEWNET))


def _bind_here(source: Path, path: Path) -> None:
    def enter() -> None:
        fd = os.open(source, os.O_RDONLY)
        try:
            os.setns(fd, os.CLONE_NEWNET)
        finally:
            os.close(fd)

    _name_here(source, path, enter)


def _name_here(source: Path, path: Path, enter: Callable[[], None]) -> None:
    """Take the name `path`, move the calling thread into its namespace (`enter`), and bind
    `source` there; on failure the name is given back."""
    # O_EXCL makes the name a lease: of two runs picking the same name, one gets EEXIST.
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o444))
    try:
        enter()
        if _libc.mount(bytes(source), bytes(path), None, MS_BIND, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot bind the namespace at {path}: {os.strerror(err)}")
    except BaseException:
        remove_namespace(path)
        raise


def remove_namespace(path: Path) -> None:
    """Unbind and delete a namespace's name; the namespace goes when nothing else holds it."""
    if _libc.umount2(bytes(path), MNT_DETACH) != 0 and ctypes.get_errno() not in (
        errno.EINVAL, errno.ENOENT
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"cannot unbind {path}: {os.strerror(err)}")
    path.unlink(missing_ok=True)


def _set_link_state(ifname: str, up: bool) -> None:
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.link("set", index=index, state="up" if up else "down")


def write_sysctl(name: str, value: str | int) -> None:
    """Set a sysctl of the calling thread's network namespace (`net.ipv4.ip_forward` style)."""
    Path("/proc/sys", *name.split(".")).write_text(f"{value}\n")
