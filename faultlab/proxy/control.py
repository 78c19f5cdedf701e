"""The proxy's control channel: typed requests and replies as JSON lines over a unix socket.

The run asks, the proxy owns: `arm` hands over the steps that fire on frames inside the proxy,
`apply` engages a fault now, `revert` disengages faults by step id (all when `steps` is null),
`number` tells the run's number of a client connection (faultlab.connections) by its port.
Both ends validate every message with these models, and a fault's parameters with the fault's
own model. A unix socket is a path in the file system, so it joins the run (host namespace) and
the proxy (router namespace) without any network.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import Field, ValidationError

from faultlab.errors import MechanismError
from faultlab.events import Event
from faultlab.faults import FAULTS, Fault, FaultParams
from faultlab.frames import FrameMatch
from faultlab.model import Model
from faultlab.vocabulary.run import TcpConnect

CONNECT_POLL_S = 0.02
# A request the proxy has not answered by then fails the run (it answers in microseconds).
CALL_TIMEOUT_S = 10.0


class FaultOrder(Model):
    """One step's fault: its id, the fault's name and its parameters (as JSON)."""

    step: str
    fault: str
    params: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, step: str, fault: str, params: FaultParams, **extra: Any) -> Self:
        return cls(step=step, fault=fault, params=params.model_dump(mode="json", by_alias=True),
                   **extra)

    def build(self) -> Fault[Any]:
        """The fault itself, its parameters validated by its own model."""
        cls = FAULTS.get(self.fault)
        if cls is None:
            raise ValueError(f"unknown fault {self.fault!r}")
        return cls(self.step, cls.Params.model_validate(self.params))


class ArmedStep(FaultOrder):
    """A step that fires inside the proxy when `match` sees its message, `after_s` later."""

    match: FrameMatch
    after_s: float = Field(default=0.0, ge=0)


class Arm(Model):
    op: Literal["arm"] = "arm"
    steps: list[ArmedStep]


class Apply(Model):
    op: Literal["apply"] = "apply"
    order: FaultOrder


class Revert(Model):
    op: Literal["revert"] = "revert"
    steps: list[str] | None = None


class Number(Model):
    """The run's number for the client's connection from `client_port` (faultlab.connections),
    as the capture saw its SYN."""

    op: Literal["number"] = "number"
    k: int = Field(ge=1)
    client_port: int = Field(ge=1, le=65535)


Body = Arm | Apply | Revert | Number


class Request(Model):
    id: int
    body: Annotated[Body, Field(discriminator="op")]


class Reply(Model):
    id: int | None = None
    ok: bool = True
    error: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    reverted: list[str] = Field(default_factory=list)


class ProxyControl:
    """The run's end of the channel."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Reply]] = set()

    async def connect(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                self._reader, self._writer = await asyncio.open_unix_connection(str(self.path))
                return
            except OSError:
                if loop.time() > deadline:
                    raise MechanismError(f"the proxy's control socket {self.path} never opened") from None
                await asyncio.sleep(CONNECT_POLL_S)

    async def call(self, body: Body) -> Reply:
        """Send one request and wait for its reply; a refusal raises MechanismError."""
        request = Request(id=next(self._ids), body=body)
        line = b""
        async with self._lock:
            if self._reader is None or self._writer is None:
                raise MechanismError("the proxy's control channel is closed (see proxy.log)")
            try:
                async with asyncio.timeout(CALL_TIMEOUT_S):
                    self._writer.write((request.model_dump_json(by_alias=True) + "\n").encode())
                    await self._writer.drain()
                    line = await self._reader.readline()
            except TimeoutError:
                pass
            finally:
                if not line:
                    # A request cut short leaves its answer unread: the channel is done.
                    self._writer.close()
                    self._reader = self._writer = None
        if not line:
            raise MechanismError(f"the proxy did not answer {body.op} (see proxy.log)")
        try:
            reply = Reply.model_validate_json(line)
        except ValidationError as exc:
            raise MechanismError(f"the proxy answered {body.op} with nonsense: {exc}") from None
        if reply.id != request.id:
            raise MechanismError(f"the proxy answered request {reply.id}, not {request.id}")
        if not reply.ok:
            raise MechanismError(f"the proxy refused {body.op}: {reply.error}")
        return reply

    async def arm(self, steps: list[ArmedStep]) -> None:
        await self.call(Arm(steps=steps))

    async def apply(self, step: str, fault: str, params: FaultParams) -> dict[str, Any]:
        """Engage a fault now; returns the details of its `fault.applied` event."""
        return (await self.call(Apply(order=FaultOrder.of(step, fault, params)))).details

    async def revert(self, steps: list[str] | None) -> list[str]:
        """Disengage these steps' faults (all when None); returns the step ids reverted."""
        return (await self.call(Revert(steps=steps))).reverted

    def observe(self, event: Event) -> None:
        """Tell the proxy each connection's number as the capture sees its SYN (`tcp.connect`)."""
        connect = TcpConnect.read(event) if event.source == "capture" else None
        if connect is None or connect.client_port is None:
            return
        task = asyncio.create_task(self.call(Number(k=connect.k, client_port=connect.client_port)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
