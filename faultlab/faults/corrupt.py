"""corrupt: a share of packets arrive with a flipped bit and a stale checksum."""

from __future__ import annotations

from typing import ClassVar

from faultlab.faults.base import register
from faultlab.faults.impairment import CorruptFields, ImpairFlow, Impairment


class CorruptParams(ImpairFlow, CorruptFields):
    """`corrupt_percent`, `direction`, `connection`."""

    required: ClassVar[tuple[str, ...]] = ("corrupt_percent",)


@register
class Corrupt(Impairment[CorruptParams]):
    """Flip one bit of a selected packet at random: the receiver's stack discards it and TCP
    retransmits, as after a bit error on a real link."""

    name: ClassVar[str] = "corrupt"
    Params = CorruptParams
