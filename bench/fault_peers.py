"""What a user would otherwise run to apply faultlab's packet faults: the same rules as one
`iptables` call each, the same tbf (or netem) with one `tc` call, the link down with one `ip`
call, each run in the lab's router namespace from the thread that lives there, as faultlab's own
mechanisms are (so both sides pay the same to reach the namespace, and only the mechanism
differs).

The iptables rules are the fault's own: the fault is applied once against a recording stand-in for
the router, which keeps the `iptables-restore` batch it would commit; each line of it becomes one
`iptables` command (`:CHAIN - [0:0]` is `-N CHAIN`).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from faultlab.connections import ConnectionTable
from faultlab.faults import FAULTS
from faultlab.faults.impairment import ImpairFlow, PathParams, as_path, egress_links
from faultlab.lab.netns import NetnsLab
from faultlab.profile import Step


class _Recorder:
    """Stands in for a namespace: keeps the (batch, table) of every `iptables-restore` the fault
    would run there, and runs nothing."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[str], str]] = []

    async def run(self, fn: Callable[..., Any], *args: Any) -> None:
        batch, table = (args[0], args[1]) if len(args) > 1 else (args[0], "filter")
        self.batches.append((list(batch), table))


async def iptables_calls(lab: NetnsLab, step: Step) -> list[list[str]]:
    """The `iptables` commands that add what `step`'s fault commits in one batch."""
    recorder = _Recorder()
    stand_in = SimpleNamespace(router=recorder, client=recorder, client_link=lab.client_link,
                               client_iface=lab.client_iface, target_link=lab.target_link)
    ctx = SimpleNamespace(lab=stand_in, connections=ConnectionTable(address=str(lab.server_address)),
                          proxy=None, mic=None)
    await FAULTS[step.fault](step.id, step.params).apply(ctx)
    calls = []
    for batch, table in recorder.batches:
        for line in batch:
            args = ["-N", line[1:].split()[0]] if line.startswith(":") else shlex.split(line)
            calls.append(["iptables", "-t", table, *args])
    return calls


def _path_of(step: Step) -> PathParams:
    """The impairment `step` applies, as `path` parameters."""
    if not isinstance(step.params, ImpairFlow):
        raise TypeError(f"step {step.id}: {step.fault} is not a packet impairment")
    return as_path(step.params)


def tc_tbf(lab: NetnsLab, step: Step) -> tuple[list[list[str]], list[list[str]]]:
    """The `tc` commands that add the rate fault's tbf (its rate, burst and limit, in bytes) on
    the links it shapes, and those that remove it."""
    path = _path_of(step)
    plan = path.plan()
    assert plan.rate_bytes_s is not None
    links = egress_links(lab, path)
    add = [["tc", "qdisc", "add", "dev", link, "root", "tbf", "rate",
            f"{int(plan.rate_bytes_s)}bps", "burst", str(plan.burst_bytes), "limit",
            str(plan.queue_bytes + plan.burst_bytes)] for link in links]
    return add, [["tc", "qdisc", "del", "dev", link, "root"] for link in links]


def tc_netem(lab: NetnsLab, step: Step) -> tuple[list[list[str]], list[list[str]]]:
    """The `tc` commands that add netem with the latency fault's delay on its links, and undo
    it."""
    path = _path_of(step)
    links = egress_links(lab, path)
    return ([["tc", "qdisc", "add", "dev", link, "root", "netem", "delay",
              f"{path.latency_ms:g}ms"] for link in links],
            [["tc", "qdisc", "del", "dev", link, "root"] for link in links])


def ip_link(lab: NetnsLab, up: bool) -> list[list[str]]:
    """`ip link set dev <the router's client link> down` (or up)."""
    return [["ip", "link", "set", "dev", lab.client_link, "up" if up else "down"]]


def _run_each(commands: Sequence[Sequence[str]]) -> None:
    for argv in commands:
        done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)}: {done.stderr.strip()}")


async def timed(lab: NetnsLab, commands: Sequence[Sequence[str]]) -> float:
    """Run `commands` one after another in the router; their milliseconds in all."""
    started = time.perf_counter()
    await lab.router.run(_run_each, commands)
    return (time.perf_counter() - started) * 1000


async def netem_missing(lab: NetnsLab) -> str | None:
    """Why this kernel cannot add a netem qdisc (None: it can), tried on the router's loopback."""

    def probe() -> str | None:
        add = subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                             capture_output=True, text=True, check=False)
        if add.returncode != 0:
            return add.stderr.strip() or f"tc exited {add.returncode}"
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True,
                       check=False)
        return None

    return await lab.router.run(probe)
