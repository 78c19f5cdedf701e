"""Packet impairments: requested against measured, and the userspace queue's speed, in one run.

In one namespace lab (needs root), each impairment applied at the router as a run applies it,
measured with real traffic from the client's namespace to the server's, then reverted:
- latency 20/50/100/200 ms: one-way delays of 500 timestamped datagrams (one clock on both
  ends): median and p99 error (goal: median within 2 ms, p99 within 5 ms);
- loss 5 % (iptables statistic) over 10,000 datagrams and 5 % in bursts of 4 (Gilbert-Elliott)
  over 40,000 (goal: within 1 percentage point);
- rate 1000 and 10000 kbps: a bulk TCP transfer's frames leaving the router (goal: within 5 %);
- the userspace queue's throughput: a flood of 64-byte datagrams through it, metadata only and
  with packet bytes copied (goal: at least 20,000 packets/s);
- the delay the queue adds at latency 0 ms, against no impairment (goal: under 0.3 ms median).

    python bench/impair_bench.py
"""

from __future__ import annotations

import asyncio
import functools
import statistics
from collections.abc import Callable
from typing import Any

from faultlab.impair import measure
from faultlab.lab.netns import NetnsLab


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


async def under[T](lab: NetnsLab, name: str, probe: Callable[[NetnsLab], T], **params: Any) -> T:
    return await measure.while_applied(lab, measure.fault_of(name, "bench", **params),
                                       probe)


def ms(values: list[float], q: float) -> float:
    return 1000 * measure.percentile(values, q)


async def latency(lab: NetnsLab) -> None:
    print("latency (one-way, to_server, 500 datagrams at 2 ms)        goal: median ±2 ms, p99 ±5 ms")
    for want in (20, 50, 100, 200):
        got = await under(lab, "latency", lambda lab: measure.stream(lab, 500, 0.002),
                          latency_ms=want, direction="to_server")
        med, p99 = ms(got.delays_s, 0.5) - want, ms(got.delays_s, 0.99) - want
        print(f"  {want:>4} ms: median {want + med:8.3f} ms ({med:+.3f}), p99 {want + p99:8.3f} ms "
              f"({p99:+.3f}), lost {got.lost}   "
              f"{verdict(abs(med) <= 2 and abs(p99) <= 5 and got.lost == 0)}")


async def loss(lab: NetnsLab) -> None:
    print("loss (to_server)                                            goal: ±1 pp")
    # Bursts make a share noisier: over 10,000 packets, 5 % in runs of 4 has a standard deviation
    # of 0.54 pp (the chain simulated with 300 seeds; independent loss: 0.22 pp), so one run in
    # 14 would miss by chance alone; 40,000 packets halve it.
    for label, count, params in (
            ("5 % independent (statistic)", 10_000, {"loss_percent": 5}),
            ("5 % in bursts of 4 (queue)", 40_000, {"loss_percent": 5, "loss_burst_packets": 4})):
        got = await under(lab, "loss", functools.partial(measure.stream, count=count,
                                                         interval_s=0.00005),
                          direction="to_server", **params)
        pct = 100 * got.lost / got.sent
        runs = got.loss_runs()
        print(f"  {label:<28} {count:>6} datagrams: measured {pct:5.2f} % ({pct - 5:+.2f} pp), "
              f"mean run {statistics.mean(runs) if runs else 0:.2f} packets   "
              f"{verdict(abs(pct - 5) <= 1)}")


async def rate(lab: NetnsLab) -> None:
    print("rate (bulk TCP for 2 s, frames leaving the router)          goal: ±5 %")
    for kbps in (1000, 10000):
        got = await under(lab, "rate", lambda lab: measure.bulk(lab, 2.0), rate_kbps=kbps,
                          direction="to_server")
        wire = got.wire_bytes_s * 8 / 1000
        err = 100 * (wire - kbps) / kbps
        print(f"  {kbps:>6} kbps: measured {wire:9.1f} kbps ({err:+.2f} %), goodput "
              f"{got.goodput_bytes_s * 8 / 1000:9.1f} kbps   {verdict(abs(err) <= 5)}")


async def queue_speed(lab: NetnsLab) -> None:
    print("userspace queue throughput (64-byte datagram flood, 2 s)    goal: >= 20,000 pkt/s")
    sent, received = await asyncio.to_thread(measure.flood, lab, 2.0)
    print(f"  no impairment (reference)       {received / 2:9.0f} pkt/s of {sent / 2:.0f} offered")
    for label, params in (("latency 0 ms (metadata only)", {"latency_ms": 0}),
                          ("corrupt 0.01 % (bytes copied)", {"corrupt_percent": 0.01})):
        sent, received = await under(lab, "path", lambda lab: measure.flood(lab, 2.0), **params)
        print(f"  {label:<31} {received / 2:9.0f} pkt/s of {sent / 2:.0f} offered   "
              f"{verdict(received / 2 >= 20_000)}")
    print("added latency at 0 ms (one-way, 2000 datagrams at 0.5 ms)   goal: < 0.3 ms median")
    base = await asyncio.to_thread(measure.stream, lab, 2000, 0.0005)
    queued = await under(lab, "latency", lambda lab: measure.stream(lab, 2000, 0.0005),
                         latency_ms=0, direction="to_server")
    added = ms(queued.delays_s, 0.5) - ms(base.delays_s, 0.5)
    print(f"  median {ms(queued.delays_s, 0.5):.3f} ms against {ms(base.delays_s, 0.5):.3f} ms "
          f"without: +{added:.3f} ms; p99 {ms(queued.delays_s, 0.99):.3f} ms against "
          f"{ms(base.delays_s, 0.99):.3f} ms   {verdict(added < 0.3)}")


async def main() -> None:
    async with NetnsLab() as lab:
        for part in (latency, loss, rate, queue_speed):
            await part(lab)


if __name__ == "__main__":
    asyncio.run(main())
