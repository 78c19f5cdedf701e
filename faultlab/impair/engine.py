"""The impairments' mechanisms: parameters to mechanisms (`Plan`), tbf at the router, the
userspace queue's process, and a probe of what the kernel offers.

Per hurt direction the router's FORWARD chain for the step holds the `statistic` loss rule, then
the NFQUEUE rule; `tbf` sits on the interface that direction leaves by (to_server: the target
link; to_client: the client link), after FORWARD, so a delayed packet is also rate-limited.
It knows nothing of faultlab.faults: the faults' parameters make their `Plan`
(faultlab.faults.impairment.PathParams.plan).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from faultlab.errors import MechanismError
from faultlab.impair.core import QueueTally, Shape
from faultlab.impair.nfqueue import QueueSocket
from faultlab.interrupt import uncancelled
from faultlab.lab import netfilter
from faultlab.lab.base import Lab
from faultlab.lab.process import terminate

TC_H_ROOT = 0xFFFFFFFF
# The table of the NFQUEUE rules: its FORWARD chain runs after filter's, so another step's drop
# or reject still acts on what a queue would accept.
QUEUE_TABLE = "security"
# Queue numbers the workers try first; each takes the next free ones (a queue is per namespace).
FIRST_QUEUE = 1000
WORKER_READY_S = 10.0
WORKER_GRACE_S = 2.0
# tbf's bucket: tbf drops a frame larger than its bucket, so at least two full-size frames; at
# higher rates 5 ms of traffic, so that the timer need not fire for every frame. Measured with a
# bulk TCP transfer: 1000 kbps +0.4 %, 10000 kbps +0.05 % (bench/impair_bench.py).
MIN_BURST_BYTES = 2 * 1514
BURST_S = 0.005


@dataclass(frozen=True)
class Plan:
    """Which mechanism does what for one step."""

    shape: Shape | None  # the userspace queue, when needed
    loss_probability: float  # independent loss by iptables `statistic`
    rate_bytes_s: float | None  # tbf
    queue_bytes: int

    @property
    def burst_bytes(self) -> int:
        assert self.rate_bytes_s is not None
        return max(MIN_BURST_BYTES, int(self.rate_bytes_s * BURST_S))

    def mechanisms(self) -> list[str]:
        out = ["tbf"] if self.rate_bytes_s is not None else []
        out += ["statistic"] if self.loss_probability else []
        return out + (["nfqueue"] if self.shape is not None else [])


def add_tbf(links: list[str], rate_bytes_s: float, burst: int, limit: int) -> None:
    """In the router's thread: a tbf root qdisc on each link, or on none (what was added is
    removed when a later link fails)."""
    done: list[str] = []
    with IPRoute() as ipr:
        for link in links:
            index = ipr.link_lookup(ifname=link)[0]
            try:
                ipr.tc("add", "tbf", index=index, rate=int(rate_bytes_s), burst=burst,
                       limit=limit + burst)
            except NetlinkError as exc:
                remove_tbf(done)
                raise MechanismError(f"cannot shape {link} (another step's rate holds it?): "
                                     f"{exc}") from None
            done.append(link)


def remove_tbf(links: list[str]) -> None:
    """In the router's thread: remove each link's root qdisc (back to veth's noqueue)."""
    with IPRoute() as ipr:
        for link in links:
            index = ipr.link_lookup(ifname=link)[0]
            with contextlib.suppress(NetlinkError):
                ipr.tc("del", index=index, parent=TC_H_ROOT)


async def start_worker(lab: Lab, shape: Shape, lanes: int,
                       lane_shapes: list[Shape] | None = None
                       ) -> tuple[asyncio.subprocess.Process, list[int]]:
    """The userspace queue's process in the router, once it has bound its queues (each lane
    with its own shape from `lane_shapes`, when given)."""
    spec: dict[str, object] = {"shape": shape.to_json(), "lanes": lanes,
                               "first_queue": FIRST_QUEUE}
    if lane_shapes is not None:
        spec["shapes"] = [one.to_json() for one in lane_shapes]
    proc = await lab.spawn("router", [sys.executable, "-m", "faultlab.impair.worker",
                                      json.dumps(spec)],
                           os.environ, stdout=asyncio.subprocess.PIPE,
                           stderr=asyncio.subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        try:
            line = (await asyncio.wait_for(proc.stdout.readline(), WORKER_READY_S)).decode()
        except TimeoutError:
            line = "no answer"
        words = line.split()
        if words[:1] != ["ready"]:
            raise MechanismError(f"the packet queue did not start: "
                                 f"{line.strip() or 'it exited'}")
    except BaseException:
        # Not the step's yet (a failed start, or a run cancelled meanwhile): stop it here.
        await uncancelled(terminate(proc, WORKER_GRACE_S))
        raise
    return proc, [int(w) for w in words[1:]]


async def stop_worker(proc: asyncio.subprocess.Process) -> list[QueueTally]:
    """Stop the userspace queue's process (it lets what it holds go first); what each of its
    queues saw, as it told on leaving (none when it did not: killed, or dead before)."""
    await terminate(proc, WORKER_GRACE_S)
    assert proc.stdout is not None
    words = (await proc.stdout.read()).decode(errors="replace").split()
    if words[:1] != ["done"]:
        return []
    try:
        return [QueueTally.parse(word) for word in words[1:]]
    except ValueError:
        return []


@dataclass(frozen=True)
class Probe:
    """What this kernel offers the impairments, found in a throwaway namespace: each
    mechanism's failure (None: it works)."""

    tbf: str | None
    statistic: str | None
    nfqueue: str | None
    netem: bool  # present or not; never used (it is missing on the machines faultlab targets)


def probe() -> Probe:
    """Try each mechanism in a network namespace of a thread's own, gone with the thread."""
    found: list[Probe] = []
    worker = threading.Thread(target=lambda: found.append(_probe_here()), daemon=True)
    worker.start()
    worker.join(timeout=20)
    if not found:
        return Probe("the probe did not finish", "not probed", "not probed", netem=False)
    return found[0]


def _probe_here() -> Probe:
    try:
        os.unshare(os.CLONE_NEWNET)
    except OSError as exc:
        return Probe(str(exc), str(exc), str(exc), netem=False)

    def attempt(step: Callable[[], object]) -> str | None:
        try:
            step()
        except (OSError, NetlinkError, MechanismError) as exc:
            return str(exc)
        return None

    with IPRoute() as ipr:
        try:
            ipr.link("add", ifname="probe0", kind="veth", peer={"ifname": "probe1"})
        except NetlinkError as exc:
            return Probe(f"no veth to probe on: {exc}", "not probed", "not probed", netem=False)
        index = ipr.link_lookup(ifname="probe0")[0]
        tbf = attempt(lambda: ipr.tc("add", "tbf", index=index, rate=125_000, burst=3028,
                                     limit=15_000))
        attempt(lambda: ipr.tc("del", index=index, parent=TC_H_ROOT))
        netem = attempt(lambda: ipr.tc("add", "netem", index=index, delay=1000)) is None
    statistic = attempt(lambda: netfilter.commit(
        ["-A FORWARD -m statistic --mode random --probability 0.5 -j DROP"]))

    def bind_and_queue() -> None:
        queue = QueueSocket()
        try:
            (number,) = queue.bind_free(FIRST_QUEUE, 1, copy_payload=False, whole_gso=True)
            netfilter.commit([f"-A FORWARD -j NFQUEUE --queue-num {number} --queue-bypass"],
                             QUEUE_TABLE)
        finally:
            queue.close()

    return Probe(tbf, statistic, attempt(bind_and_queue), netem)
