"""duplicate: a share of packets arrive twice."""

from __future__ import annotations

from typing import ClassVar

from faultlab.faults.base import register
from faultlab.faults.impairment import DuplicateFields, ImpairFlow, Impairment


class DuplicateParams(ImpairFlow, DuplicateFields):
    """`duplicate_percent`, `direction`, `connection`."""

    required: ClassVar[tuple[str, ...]] = ("duplicate_percent",)


@register
class Duplicate(Impairment[DuplicateParams]):
    """Let each selected packet through and, at random, send a copy right after it."""

    name: ClassVar[str] = "duplicate"
    Params = DuplicateParams
