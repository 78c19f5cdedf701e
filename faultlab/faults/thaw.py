"""thaw: end freezes; what they held is delivered in order, or discarded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from faultlab.faults.app import AppFault, AppParams
from faultlab.faults.base import register
from faultlab.faults.freeze import Freeze

if TYPE_CHECKING:
    from faultlab.faults.app import ProxyView


class ThawParams(AppParams):
    """`faults`: the freeze steps to end (all active freezes when empty); `discard`: drop what
    they held instead of delivering it."""

    faults: list[str] = Field(default_factory=list)
    """The ids of the freeze steps to end; empty: every active freeze."""
    discard: bool = False
    """`true`: drop the data messages the freezes held instead of delivering them in order."""

    def referenced_steps(self) -> Sequence[str]:
        return self.faults


@register
class Thaw(AppFault[ThawParams]):
    """End freezes, delivering (or discarding) the messages they held."""

    name: ClassVar[str] = "thaw"
    Params = ThawParams
    reversible: ClassVar[bool] = False

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        steps = [s for s, f in proxy.active.items() if isinstance(f, Freeze)
                 and (not self.params.faults or s in self.params.faults)]
        held = 0
        for step in steps:
            freeze = proxy.active[step]
            assert isinstance(freeze, Freeze)
            held += len(freeze.held)
            freeze.discard = self.params.discard
            proxy.disengage(step)
        return {"thawed": steps, "held_messages": held, "discarded": self.params.discard}

    def ends(self, details: Mapping[str, Any]) -> Sequence[str]:
        return list(details.get("thawed") or ())
