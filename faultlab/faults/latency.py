"""latency: each packet leaves the router `latency_ms` (± jitter) late, in order by default."""

from __future__ import annotations

from typing import ClassVar

from faultlab.faults.base import register
from faultlab.faults.impairment import ImpairFlow, Impairment, LatencyFields


class LatencyParams(ImpairFlow, LatencyFields):
    """`latency_ms` (0 is allowed: the queue with no delay), `jitter_ms`, `distribution`,
    `keep_order`, `direction`, `connection`."""

    required: ClassVar[tuple[str, ...]] = ("latency_ms",)


@register
class Latency(Impairment[LatencyParams]):
    """Hold each selected packet in the router's userspace queue for its delay."""

    name: ClassVar[str] = "latency"
    Params = LatencyParams
