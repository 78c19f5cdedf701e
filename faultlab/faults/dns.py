"""dns: from the step on, the lab's resolver answers the target's names with NXDOMAIN, SERVFAIL,
nothing at all, or the right address late, so a client that reconnects meets it; connections
already open are unharmed. `revert` brings the normal answers back.

A run with a dns step has the client resolve the lab's names with the lab's resolver in the
router (faultlab.resolver), not with /etc/hosts; its resolv.conf asks with `timeout:1
attempts:2` (faultlab.launch), so no answer costs a glibc client about 2 s per lookup, and an
answer later than that is no answer.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import Field, field_validator, model_validator

from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, FaultParams, Layer, Need, register
from faultlab.model import Duration, host_name
from faultlab.resolver.answers import Answer


class DnsParams(FaultParams):
    """`answer`: nxdomain (the name does not exist), servfail (the resolver failed), none (no
    answer: the client's resolver times out) or slow (the right answer, `delay` late, e.g.
    `delay: 800ms`); `names`: the names hurt (default: the names the client resolves the target
    by)."""

    answer: Answer
    """What the resolver answers: `nxdomain` (the name does not exist), `servfail` (the resolver
    failed), `none` (no answer: the lookup times out) or `slow` (the right answer, `delay` late)."""
    delay: Duration | None = None
    """With `answer: slow` only, and required there: how late the answer comes, a duration above 0
    (`800ms`); past about 2 s the client has given up on it."""
    names: list[str] | None = Field(default=None, min_length=1)
    """The host names answered as `answer` says; absent: the names the client looks the target up
    by (an emulator's service names, a remote target's `host`, the profile's `hosts`)."""

    @field_validator("names")
    @classmethod
    def _host_names(cls, names: list[str] | None) -> list[str] | None:
        return None if names is None else [host_name(name).lower() for name in names]

    @model_validator(mode="after")
    def _delay_when_slow(self) -> Self:
        if self.answer == "slow" and not self.delay:
            raise ValueError("a slow answer needs a 'delay' above zero (e.g. delay: 800ms)")
        if self.answer != "slow" and self.delay is not None:
            raise ValueError(f"'delay' goes with answer: slow, not {self.answer}")
        return self


@register
class Dns(Fault[DnsParams]):
    """The lab's resolver answers the step's names as it says, until reverted."""

    name: ClassVar[str] = "dns"
    layer: ClassVar[Layer] = "packet"
    mechanism: ClassVar[str] = "faultlab's DNS server in the router (faultlab.resolver)"
    Params = DnsParams
    needs: ClassVar[frozenset[Need]] = frozenset({"dns"})

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        if ctx.resolver is None:
            raise MechanismError("dns needs the lab's resolver, which the run starts for a "
                                 "profile with a dns step")
        p = self.params
        names = await ctx.resolver.set_answer(self.step_id, p.names, p.answer, p.delay or 0.0)
        details = p.model_dump(mode="json", exclude_none=True)
        return {**details, "names": names}

    async def revert(self, ctx: FaultContext) -> None:
        if ctx.resolver is not None:
            await ctx.resolver.clear_answer(self.step_id)
