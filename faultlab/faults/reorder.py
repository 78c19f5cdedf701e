"""reorder: a share of packets arrive after later ones."""

from __future__ import annotations

from typing import ClassVar

from faultlab.faults.base import register
from faultlab.faults.impairment import ImpairFlow, Impairment, ReorderFields


class ReorderParams(ImpairFlow, ReorderFields):
    """`reorder_percent`, `reorder_gap` (how many later packets overtake), `direction`,
    `connection`."""

    required: ClassVar[tuple[str, ...]] = ("reorder_percent",)


@register
class Reorder(Impairment[ReorderParams]):
    """Hold a selected packet back at random until `reorder_gap` later ones have left."""

    name: ClassVar[str] = "reorder"
    Params = ReorderParams
