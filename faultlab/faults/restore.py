"""restore: revert the named faults, or every active one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field

from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, register


class RestoreParams(FaultParams):
    """`faults`: step ids whose faults to revert; empty or absent means all active faults."""

    faults: list[str] = Field(default_factory=list)
    """The ids of the steps whose faults to revert; absent or empty: every active fault."""

    def referenced_steps(self) -> Sequence[str]:
        return self.faults


@register
class Restore(Fault[RestoreParams]):
    """Return the path to health by reverting faults applied by earlier steps."""

    name: ClassVar[str] = "restore"
    mechanism: ClassVar[str] = "reverts earlier steps"
    layer: ClassVar[Layer] = "packet"
    Params = RestoreParams
    reversible: ClassVar[bool] = False

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        reverted = await ctx.revert(self.params.faults or None)
        return {"reverted": reverted}

    def ends(self, details: Mapping[str, Any]) -> Sequence[str]:
        return list(details.get("reverted") or ())

    async def revert(self, ctx: FaultContext) -> None:
        """Nothing to undo: restoring changed nothing of its own."""
