"""The lab resolver's start spec and its control channel: typed orders and replies as JSON lines
over a unix socket in the lab's scratch folder (a path, so it joins the run in the host's
namespace and the resolver in the router's without any network).

`set` makes the resolver answer a step's names as the step says from now on, `clear` brings
the normal answers back. Each order is one short connection: a fault applies and reverts once,
and the resolver answers in microseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError

from faultlab.errors import MechanismError
from faultlab.model import Model
from faultlab.resolver.answers import Answer

# An order the resolver has not answered by then fails the step.
CALL_TIMEOUT_S = 5.0


class ResolverSpec(Model):
    """What the resolver process is started with: where it listens, the lab's names and their
    addresses, the names a step hurts by default, the upstream for other names (None: refused),
    and its control socket."""

    listen: str
    port: int = Field(default=53, ge=1, le=65535)
    zone: dict[str, str] = Field(default_factory=dict)
    target_names: list[str] = Field(default_factory=list)
    upstream: str | None = None
    upstream_port: int = Field(default=53, ge=1, le=65535)
    control: Path


class SetAnswer(Model):
    """From now on answer `answer` for `names` (the target's when None), `delay_s` late when
    slow; the reply names the names hurt."""

    op: Literal["set"] = "set"
    step: str
    names: list[str] | None = None
    answer: Answer
    delay_s: float = Field(default=0.0, ge=0)


class ClearAnswer(Model):
    """Normal answers again for the names of `step`."""

    op: Literal["clear"] = "clear"
    step: str


Order = Annotated[SetAnswer | ClearAnswer, Field(discriminator="op")]
ORDER: TypeAdapter[SetAnswer | ClearAnswer] = TypeAdapter(Order)


class Reply(Model):
    ok: bool = True
    error: str | None = None
    names: list[str] = Field(default_factory=list)


class ResolverControl:
    """The run's end of the channel (a `ResolverChannel` for the faults)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def call(self, order: SetAnswer | ClearAnswer) -> Reply:
        """Send one order and wait for its reply; a refusal raises MechanismError."""
        line = b""
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                reader, writer = await asyncio.open_unix_connection(str(self.path))
                try:
                    writer.write(order.model_dump_json().encode() + b"\n")
                    await writer.drain()
                    line = await reader.readline()
                finally:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
        except (OSError, TimeoutError) as exc:
            why = str(exc) or "no answer"
            raise MechanismError(f"the lab's resolver did not take {order.op} ({why}; see "
                                 f"resolver.log)") from None
        try:
            reply = Reply.model_validate_json(line)
        except ValidationError:
            raise MechanismError(f"the lab's resolver answered {order.op} with "
                                 f"{line[:80]!r}") from None
        if not reply.ok:
            raise MechanismError(f"the lab's resolver refused {order.op}: {reply.error}")
        return reply

    async def set_answer(self, step: str, names: list[str] | None, answer: Answer,
                         delay_s: float) -> list[str]:
        """Answer `answer` for `names` from now on; returns the names hurt."""
        reply = await self.call(SetAnswer(step=step, names=names, answer=answer, delay_s=delay_s))
        return reply.names

    async def clear_answer(self, step: str) -> None:
        await self.call(ClearAnswer(step=step))
