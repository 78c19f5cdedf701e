"""The lab's figures: set-up + teardown of a netns lab beside the same topology built by an `ip`
CLI script (goal: at least as fast, and <= 100 ms) and beside `docker run --rm` of a minimal
container on the local engine (goal: 5x faster; skipped with the reason when no engine answers);
and the start-up a container client costs over a namespace client (docker lab, faultlab-clients
image, alternating; from `Lab.start` until the program runs; goal <= 400 ms at the median).

Needs root. `make bench`'s part `lab` (alone: `python bench/all.py --only lab`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import lab_peers
from table import Measure, Row, alone, print_beside, print_figure, skipped, versus

from faultlab.errors import LabError
from faultlab.lab.base import Image
from faultlab.lab.docker import DockerLab
from faultlab.lab.engine import CLIENTS_IMAGE, engine_images
from faultlab.lab.netns import NetnsLab


async def bench_lab(n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        async with NetnsLab():
            pass
        times.append((time.perf_counter() - started) * 1000)
    return times


async def bench_lab_vs_ip(n: int) -> tuple[list[float], list[float], int]:
    """Lab set-up + teardown by faultlab and by the `ip` script, alternating: (faultlab ms,
    script ms, `ip` commands in the script)."""
    script = lab_peers.IpScript(os.getpid())
    ours, theirs = [], []
    try:
        for _ in range(n):
            ours += await bench_lab(1)
            theirs.append(script.once())
    finally:
        script.close()
    return ours, theirs, script.commands


async def lab_rows(n: int) -> list[Row]:
    figure = "lab set-up + teardown (median)"
    ours, theirs, commands = await bench_lab_vs_ip(n)
    med, ip_med = statistics.median(ours), statistics.median(theirs)
    print_figure(f"lab set-up + teardown, median of {n}", med, "ms", "<= 100", med <= 100)
    print(f"{'':<44} (min {min(ours):.1f}, max {max(ours):.1f})")
    print_beside(f"ip CLI script ({commands} ip commands)", ip_med, "ms")
    rows = [versus(figure, Measure(med, "ms"), "ip CLI script", Measure(ip_med, "ms"), "lower",
                   at_least=1, also=med <= 100, goal="<= 100 ms",
                   note=f"faultlab: NetnsLab() entered and left (3 namespaces, 2 veth pairs, "
                        f"addresses, routes, forwarding; its lease and scratch folder); ip CLI: "
                        f"the same topology and its teardown as a sh script of {commands} `ip` "
                        f"commands; alternating, {n} each, medians")]
    image, why = lab_peers.docker_image()
    if image is None:
        print(f"  docker run --rm skipped: {why}")
        rows.append(skipped(figure, "docker run --rm", why, goal=">= 5x"))
        return rows
    k = max(n // 3, 5)
    runs = [lab_peers.docker_run(image) for _ in range(k)]
    print_beside(f"docker run --rm {image}, median of {k}", statistics.median(runs), "ms")
    rows.append(versus(figure, Measure(med, "ms"), "docker run --rm",
                       Measure(statistics.median(runs), "ms"), "lower", at_least=5,
                       note=f"docker: `docker run --rm --network none {image} true` on the local "
                            f"engine, until removed; median of {k}"))
    return rows


async def bench_member_start(n: int, image: str) -> tuple[list[float], list[float]]:
    """From `Lab.start` until the member's program runs, for a namespace client and a container
    client of `image`, alternating, in labs of the docker backend: (namespace ms, container ms)."""
    folder = Path(tempfile.mkdtemp(prefix="faultlab-bench-"))

    async def once(lab: DockerLab, container: Image | None) -> float:
        mark = folder / f"ran-{time.perf_counter_ns()}"
        started = time.perf_counter()
        member = await lab.start("client", ["sh", "-c", f"echo > {mark}"], {}, None,
                                 folder / "log", container)
        while not mark.exists():
            await asyncio.sleep(0.001)
        elapsed = (time.perf_counter() - started) * 1000
        await member.wait()
        return elapsed

    netns, containers = [], []
    try:
        for _ in range(n):
            async with DockerLab() as lab:
                netns.append(await once(lab, None))
            async with DockerLab() as lab:
                containers.append(await once(lab, Image(image, (folder,))))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return netns, containers


def container_rows(n: int) -> list[Row]:
    """The start-up a container client costs over a namespace client (the docker lab)."""
    figure = "container client's extra start-up"
    try:
        _, have = engine_images([CLIENTS_IMAGE])
    except LabError as exc:
        print(f"container client start-up skipped: {exc}")
        return [skipped(figure, None, str(exc), goal="<= 400 ms")]
    if not have[CLIENTS_IMAGE]:
        why = f"no {CLIENTS_IMAGE} image (make images)"
        print(f"container client start-up skipped: {why}")
        return [skipped(figure, None, why, goal="<= 400 ms")]
    netns, containers = asyncio.run(bench_member_start(n, CLIENTS_IMAGE))
    extra = statistics.median(containers) - statistics.median(netns)
    print(f"{'client start-up, namespace, median of ' + str(n):<44} {statistics.median(netns):>10.2f} ms")
    print(f"{'client start-up, container, median of ' + str(n):<44} "
          f"{statistics.median(containers):>10.2f} ms")
    print_figure("container client's extra start-up", extra, "ms", "<= 400", extra <= 400)
    return [alone(figure, Measure(extra, "ms"), "lower", "<= 400 ms", extra <= 400,
                  note=f"containers: median start-up of a {CLIENTS_IMAGE} client minus a "
                       f"namespace client's, in docker labs, alternating, {n} each")]


def collect(n: int = 30) -> list[Row]:
    """The lab's rows (`n` builds each), then the container client's (a third as many)."""
    return [*asyncio.run(lab_rows(n)), *container_rows(max(n // 3, 5))]
