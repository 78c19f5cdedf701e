"""turn_down: the lab's TURN server dies (a profile's `turn`), as a crashed coturn does: SIGKILL,
so the kernel closes its sockets (measured: a new allocation over TCP or TLS is refused at once)
and its relays are gone. `restore` starts it again with the same credentials: a client may
allocate anew (at the run's end it stays down). Two steps at once kill it once and start it once.
"""

from __future__ import annotations

from typing import Any, ClassVar

from faultlab.errors import LabError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, Need, register


class TurnDownParams(FaultParams):
    """No parameters: the lab's TURN server is killed."""


@register
class TurnDown(Fault[TurnDownParams]):
    """Kill the lab's TURN server until reverted; reverting starts it again."""

    name: ClassVar[str] = "turn_down"
    mechanism: ClassVar[str] = "SIGKILL of the lab's TURN server (coturn)"
    layer: ClassVar[Layer] = "packet"
    needs: ClassVar[frozenset[Need]] = frozenset({"turn"})
    Params = TurnDownParams

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        if ctx.turn is None:
            raise LabError("turn_down needs the lab's TURN server: give the profile a 'turn'")
        return {"pid": await ctx.turn.kill()}

    async def revert(self, ctx: FaultContext) -> None:
        assert ctx.turn is not None
        await ctx.turn.start()
