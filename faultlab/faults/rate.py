"""rate: a slow link: packets leave the router at `rate_kbps`, queue up to `queue_ms`, then drop."""

from __future__ import annotations

from typing import ClassVar

from faultlab.faults.base import register
from faultlab.faults.impairment import ImpairFlow, Impairment, RateFields


class RateParams(ImpairFlow, RateFields):
    """`rate_kbps`, `queue_ms`, `direction` (a whole link: no `connection`)."""

    required: ClassVar[tuple[str, ...]] = ("rate_kbps",)


@register
class Rate(Impairment[RateParams]):
    """Shape the router's egress toward the hurt end with a token bucket (tbf)."""

    name: ClassVar[str] = "rate"
    mechanism: ClassVar[str] = "tbf on the router's egress link"
    Params = RateParams
