"""Starting the lab's resolver for a run: the process in the router, and its control channel."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from contextlib import AsyncExitStack
from ipaddress import IPv4Address
from pathlib import Path

from faultlab.errors import LabError
from faultlab.events import EventBus
from faultlab.lab.base import Lab
from faultlab.lab.process import READY_POLL_S, LabProcess
from faultlab.private import create_private
from faultlab.resolver.control import ResolverControl, ResolverSpec
from faultlab.vocabulary.lab import ResolverReady

# It imports faultlab's events and pydantic in ~0.5 s here (more on a loaded machine).
READY_S = 15.0


async def launch_resolver(lab: Lab, zone: dict[str, str], target_names: list[str],
                          upstream: IPv4Address | None, work_dir: Path, events_file: Path,
                          bus: EventBus, stack: AsyncExitStack) -> ResolverControl:
    """The resolver in the router, on its address toward the client, answering `zone`'s names
    with their addresses and asking `upstream` (None: refusing) for others; everything it
    leaves is stopped and removed by `stack`, and by `lab gc` after a SIGKILL (a process in the
    lab's namespace, a socket in its scratch folder)."""
    # A unix socket path is limited to 108 bytes: the run folder may be deeper than that.
    control_path = lab.scratch / "dns.sock"
    stack.callback(control_path.unlink, True)
    listen = str(lab.router_address)
    spec = ResolverSpec(listen=listen, zone=zone, target_names=target_names,
                        upstream=None if upstream is None else str(upstream), control=control_path)
    argv = [sys.executable, "-m", "faultlab.resolver", spec.model_dump_json()]
    env = dict(os.environ, FAULTLAB_EVENTS=str(events_file))
    log = create_private(work_dir / "resolver.log")
    resolver = LabProcess.started("resolver", await lab.start("router", argv, env, None, log),
                                  argv, bus)
    stack.push_async_callback(resolver.stop)
    await wait_ready(resolver, control_path, READY_S, log)
    bus.announce("faultlab", ResolverReady(listen, sorted(zone), spec.upstream))
    return ResolverControl(control_path)


async def wait_ready(resolver: LabProcess, control: Path, timeout_s: float, log: Path) -> None:
    """Return once the resolver's control socket takes a connection (it listens for queries
    before that); a resolver that exits or takes longer than `timeout_s` fails the run."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_unix_connection(str(control))
            writer.close()
            return
        if not resolver.alive:
            said = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise LabError(f"the lab's resolver exited with code {resolver.returncode}: "
                           f"{said[0]} (see {log})")
        if loop.time() > deadline:
            raise LabError(f"the lab's resolver was not ready within {timeout_s:g}s; see {log}")
        await asyncio.sleep(READY_POLL_S)
