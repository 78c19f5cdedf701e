"""A network namespace with a thread of its own living in it.

`setns` changes only the calling thread's namespace, and a process forked from that thread starts
in it: so one asyncio process drives several namespaces, each through its own worker thread, and
`iptables-restore` run from that thread needs no `nsenter`. Synchronous pyroute2 calls also belong
in a worker thread (inside a running event loop they fail).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pyroute2 import IPRoute


class Namespace:
    """A named network namespace, bound at `path`, and the worker thread that lives in it."""

    def __init__(self, role: str, path: Path) -> None:
        self.role = role
        self.path = path
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"ns-{role}", initializer=self._enter
        )

    @property
    def name(self) -> str:
        return self.path.name

    def _enter(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.setns(fd, os.CLONE_NEWNET)
        finally:
            os.close(fd)

    def call[T](self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(*args)` in the namespace and wait for it (for code outside the event loop)."""
        return self._executor.submit(fn, *args).result()

    async def run[T](self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(*args)` in the namespace without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    async def set_link_state(self, ifname: str, up: bool) -> None:
        await self.run(_set_link_state, ifname, up)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _set_link_state(ifname: str, up: bool) -> None:
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.link("set", index=index, state="up" if up else "down")


def write_sysctl(name: str, value: str | int) -> None:
    """Set a sysctl of the calling thread's network namespace (`net.ipv4.ip_forward` style)."""
    Path("/proc/sys", *name.split(".")).write_text(f"{value}\n")
