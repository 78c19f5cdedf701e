"""path: a whole bad path in one step: latency and jitter, loss, a rate limit, duplication,
reordering and corruption, together on the chosen direction."""

from __future__ import annotations

from typing import ClassVar

from faultlab.faults.base import register
from faultlab.faults.impairment import Impairment, PathParams


@register
class Path(Impairment[PathParams]):
    """Every impairment the step names, at the router, until reverted."""

    name: ClassVar[str] = "path"
    mechanism: ClassVar[str] = "tbf, iptables statistic and the NFQUEUE userspace queue at the router"
    Params = PathParams
