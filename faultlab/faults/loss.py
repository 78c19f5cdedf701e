"""loss: a share of packets vanish at random, independently or in bursts."""

from __future__ import annotations

from typing import ClassVar

from faultlab.faults.base import register
from faultlab.faults.impairment import ImpairFlow, Impairment, LossFields


class LossParams(ImpairFlow, LossFields):
    """`loss_percent`, `loss_burst_packets` (mean run of lost packets), `direction`,
    `connection`."""

    required: ClassVar[tuple[str, ...]] = ("loss_percent",)


@register
class Loss(Impairment[LossParams]):
    """Drop the selected packets at random: an iptables `statistic` rule, or the userspace
    queue's Gilbert-Elliott chain for bursts."""

    name: ClassVar[str] = "loss"
    mechanism: ClassVar[str] = "iptables statistic (bursts: NFQUEUE userspace queue) at the router"
    Params = LossParams
