"""mic_stall: the client's microphone hands over nothing for a while (a browser's empty buffers)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from faultlab.errors import LabError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, Need, register
from faultlab.model import Duration


class MicStallParams(FaultParams):
    """`for`: how long the lab's microphone (`mic` in the profile) delivers no audio."""

    duration: Duration = Field(alias="for")
    """How long the lab's microphone (`mic` in the profile) delivers no audio, a duration (`3s`);
    the speech of that time is lost."""


@register
class MicStall(Fault[MicStallParams]):
    """Stop the virtual microphone's pieces for `for`; the speech of that time is lost, and the
    network is untouched: only a client that carries pauses as silence keeps the turn going."""

    name: ClassVar[str] = "mic_stall"
    mechanism: ClassVar[str] = "the lab's virtual microphone pauses"
    layer: ClassVar[Layer] = "client"
    needs: ClassVar[frozenset[Need]] = frozenset({"mic"})
    Params = MicStallParams
    reversible: ClassVar[bool] = False  # the stall ends by itself

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        if ctx.mic is None:
            raise LabError("mic_stall needs the lab's microphone: give the profile a 'mic'")
        ctx.mic.stall(self.params.duration)
        return {}

    @property
    def lasts_s(self) -> float:
        return self.params.duration

    async def revert(self, ctx: FaultContext) -> None:
        """Nothing to undo."""
