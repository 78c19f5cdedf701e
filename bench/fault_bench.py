"""Each packet fault's applied_in_ms (trigger to kernel commit), median over N applications,
alternating with the same change made by the CLI a user would script: the fault's iptables rules
as one `iptables` call each (drop, reject; goal 3x faster), the link down with `ip link`, the
rate's tbf with `tc` (goal <= 15 ms for every fault); netem only where the kernel has it.

Needs root. `make bench`'s part `faults` (alone: `python bench/all.py --only faults`).
"""

from __future__ import annotations

import asyncio
import statistics

import fault_peers
from table import Measure, Row, print_beside, print_figure, skipped, versus

from faultlab.connections import ConnectionTable
from faultlab.events import EventBus, RunClock
from faultlab.injector import FaultRuntime
from faultlab.lab.netfilter import chain_name, uninstall
from faultlab.lab.netns import NetnsLab
from faultlab.profile import parse_profile
from faultlab.timeline import Due

FAULTS = """\
name: bench
client: {command: [sleep, "1"]}
timeline:
  - {id: drop, when: {at: 0s}, do: {fault: drop}}
  - {id: reject, when: {at: 0s}, do: {fault: reject}}
  - {id: linkdown, when: {at: 0s}, do: {fault: link_down}}
  - {id: rate, when: {at: 0s}, do: {fault: rate, rate_kbps: 1000, direction: to_server}}
  - {id: latency, when: {at: 0s}, do: {fault: latency, latency_ms: 20, direction: to_server}}
"""
# The faults whose applied_in_ms has a goal (the latency fault starts its queue's worker process
# and is measured only beside netem, where the kernel has it).
FAST_FAULTS = ("drop", "reject", "link_down", "rate")


async def fault_rows(n: int) -> list[Row]:
    """Each fault applied by faultlab, alternating with its peer's commands in the same lab."""
    steps = list(parse_profile(FAULTS).timeline)
    bus = EventBus(RunClock())
    rows: list[Row] = []
    async with NetnsLab() as lab:
        runtime = FaultRuntime(lab, ConnectionTable(address=str(lab.server_address)), bus, None, None,
                               steps, on_failure=print)
        no_netem = await fault_peers.netem_missing(lab)
        # step id -> (peer, its commands, the commands that undo them or None: the fault's chain)
        peers: dict[str, tuple[str, list[list[str]], list[list[str]] | None]] = {}
        for step in steps:
            if step.fault in ("drop", "reject"):
                calls = await fault_peers.iptables_calls(lab, step)
                peers[step.id] = (f"iptables x{len(calls)} calls", calls, None)
            elif step.fault == "link_down":
                peers[step.id] = ("ip link set down", fault_peers.ip_link(lab, up=False),
                                  fault_peers.ip_link(lab, up=True))
            elif step.fault == "rate":
                peers[step.id] = ("tc qdisc add tbf", *fault_peers.tc_tbf(lab, step))
            elif step.fault == "latency" and no_netem is None:
                peers[step.id] = ("tc qdisc add netem", *fault_peers.tc_netem(lab, step))
        measured = [s for s in steps if s.id in peers]
        ours: dict[str, list[float]] = {s.id: [] for s in measured}
        theirs: dict[str, list[float]] = {s.id: [] for s in measured}
        for _ in range(n):
            for step in measured:
                await runtime.apply(Due(step, 0.0, "bench"))
                ours[step.id].append(float(bus.events[-1].fields["applied_in_ms"]))
                await runtime.revert([step.id])
                _, commands, undo = peers[step.id]
                theirs[step.id].append(await fault_peers.timed(lab, commands))
                if undo is None:
                    await uninstall(lab.router, ["FORWARD"], chain_name(step.id))
                else:
                    await fault_peers.timed(lab, undo)
    for step in measured:
        peer, commands, _ = peers[step.id]
        med, peer_med = statistics.median(ours[step.id]), statistics.median(theirs[step.id])
        fast = step.fault in FAST_FAULTS
        if fast:
            print_figure(f"fault {step.fault} applied_in_ms, median of {n}", med, "ms", "<= 15",
                         med <= 15)
        else:
            print(f"{'fault ' + step.fault + ' applied_in_ms, median of ' + str(n):<44} "
                  f"{med:>10.2f} ms")
        print_beside(peer, peer_med, "ms")
        what = "; ".join(" ".join(c) for c in commands)
        rows.append(versus(
            f"fault {step.fault} applied (median)", Measure(med, "ms"), peer,
            Measure(peer_med, "ms"), "lower",
            at_least=3 if step.fault in ("drop", "reject") else None,
            also=med <= 15 if fast else None, goal="<= 15 ms" if fast else "",
            note=f"{step.fault}: faultlab's applied_in_ms (trigger to kernel commit) beside the "
                 f"same change as {len(commands)} command(s) in the router namespace, "
                 f"alternating, medians of {n}: {what}"))
    if no_netem is not None:
        print(f"  tc qdisc add netem skipped: {no_netem}")
        rows.append(skipped("fault latency applied", "tc qdisc add netem",
                            f"this kernel has no netem qdisc (tc: {no_netem})",
                            note="latency: faultlab delays packets in its own userspace queue "
                                 "(NFQUEUE); netem is the kernel's way, missing here"))
    return rows


def collect(n: int = 30) -> list[Row]:
    """Each fault applied `n` times, alternating with its peer's commands."""
    return asyncio.run(fault_rows(n))
