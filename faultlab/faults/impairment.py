"""The packet impairments' common part: their parameters (one group of fields per impairment,
each with its own checks; `path` takes them all, each single fault its own group) and the fault
body that installs their mechanisms at the router (faultlab.impair) and removes them.

Every group's fields are also `PathParams` fields, so a fault reads its parameters as a
`PathParams` (`as_path`) and there is one place that turns parameters into mechanisms. This
module registers no fault of its own.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, ClassVar, Literal, Self

from pydantic import ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.json_schema import JsonSchemaValue

from faultlab.connections import Connection
from faultlab.errors import MechanismError
from faultlab.faults.base import Fault, FaultContext, Layer
from faultlab.faults.flows import (
    Direction,
    FlowParams,
    OneWay,
    hurt_directions,
    iptables_matches,
)
from faultlab.faults.legs import LEGS, LegChain, LegMatch, leg_matches, proxied
from faultlab.impair.core import DUPLICATE_MARK, QueueTally, Shape
from faultlab.impair.engine import (
    QUEUE_TABLE,
    Plan,
    add_tbf,
    remove_tbf,
    start_worker,
    stop_worker,
)
from faultlab.lab.base import Lab
from faultlab.lab.namespace import Namespace
from faultlab.lab.netfilter import chain_name, install, uninstall
from faultlab.model import Model

Percent = Field(default=0.0, ge=0, le=100)


class ImpairFlow(FlowParams):
    """`direction` and `connection`, and which of a fault's fields a step must give."""

    direction: Direction = "both"
    """Which way's packets are hurt: `both` (each way by the full amount), `to_server` or
    `to_client`."""
    required: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __get_pydantic_json_schema__(cls, core: Any,  # pydantic_core's CoreSchema
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The fields a step must give are required in the profile's schema too."""
        schema = handler(core)
        fields = handler.resolve_ref_schema(schema)
        if cls.required:
            fields["required"] = [*fields.get("required", ()), *cls.required]
        return schema

    @model_validator(mode="after")
    def _required_given(self) -> Self:
        missing = [name for name in self.required if name not in self.model_fields_set]
        if missing:
            raise ValueError(f"{' and '.join(missing)} must be given")
        return self


class LatencyFields(Model):
    """`latency_ms` added to each packet, give or take `jitter_ms` drawn from a `distribution`
    (uniform: within ± jitter; normal: jitter is the standard deviation); `keep_order: false`
    lets a packet with a short draw overtake one ahead of it."""

    latency_ms: float = Field(default=0.0, ge=0, le=60_000)
    """The delay added to each packet at the router, in milliseconds (at most 60000); given as
    `0`, the packets go through the queue with no delay."""
    jitter_ms: float = Field(default=0.0, ge=0)
    """How much each packet's delay varies, in milliseconds (at most `latency_ms`), drawn as
    `distribution` says."""
    distribution: Literal["uniform", "normal"] = "uniform"
    """How the jitter is drawn: `uniform` (within ± `jitter_ms`) or `normal` (`jitter_ms` is the
    standard deviation; a delay is never below 0)."""
    keep_order: bool = True
    """`true`: a packet never leaves before the one ahead of it (delays bunch upward under dense
    traffic, as queueing does); `false`: a packet with a shorter delay may overtake."""

    @model_validator(mode="after")
    def _jitter_within_latency(self) -> Self:
        if self.jitter_ms > self.latency_ms:
            raise ValueError("jitter_ms must not exceed latency_ms (a packet cannot leave "
                             "before it arrived)")
        return self


class LossFields(Model):
    """`loss_percent` of packets lost; with `loss_burst_packets` above 1, in runs of that mean
    length (a Gilbert-Elliott chain, as on a fading radio link)."""

    loss_percent: float = Percent
    """The share of packets dropped, in percent (0-100)."""
    loss_burst_packets: float = Field(default=1.0, ge=1, le=10_000)
    """The mean run of consecutive losses, in packets: `1` loses packets independently; b above 1,
    in bursts (a Gilbert-Elliott chain, as on a fading radio link), with `loss_percent` at most
    100·b/(b+1). The chain steps once a packet and once more per 10 ms since the packet before,
    so packets sent back to back lose runs of about b, sparser ones shorter runs."""

    @model_validator(mode="after")
    def _burst_fits(self) -> Self:
        b = self.loss_burst_packets
        if b > 1 and not self.loss_percent:
            raise ValueError("loss_burst_packets needs loss_percent")
        # Runs of mean length b separated by at least one good packet lose at most b / (b + 1).
        if b > 1 and self.loss_percent > 100 * b / (b + 1):
            raise ValueError(f"loss_percent {self.loss_percent:g} cannot come in runs of "
                             f"{b:g} packets: at most {100 * b / (b + 1):.4g}")
        return self


class RateFields(Model):
    """`rate_kbps` of bandwidth (kilobits per second) with a queue holding `queue_ms` of
    traffic at that rate; what does not fit is dropped (a whole link: no `connection`)."""

    rate_kbps: float | None = Field(default=None, gt=0, le=10_000_000)
    """The bandwidth each hurt direction leaves the router at, in kilobits per second counted on
    Ethernet frames; it shapes the whole link, so no `connection` goes with it."""
    queue_ms: float = Field(default=100.0, gt=0, le=60_000)
    """How much traffic at `rate_kbps` the queue holds before it drops, in milliseconds (on top of
    tbf's bucket of at least two full frames, 3,028 bytes: at 64 kbit/s the default queue holds
    about 480 ms); needs `rate_kbps`."""

    @model_validator(mode="after")
    def _rate_is_per_link(self) -> Self:
        if self.rate_kbps is None and "queue_ms" in self.model_fields_set:
            raise ValueError("queue_ms needs rate_kbps")
        if self.rate_kbps is not None and getattr(self, "connection", None) is not None:
            raise ValueError("rate shapes a whole link (tbf on the router's interface): it "
                             "cannot pick one connection")
        return self


class DuplicateFields(Model):
    """`duplicate_percent` of packets delivered twice."""

    duplicate_percent: float = Percent
    """The share of packets delivered twice, in percent (0-100): the copy right after the
    original."""


class ReorderFields(Model):
    """`reorder_percent` of packets held back until `reorder_gap` later packets have left (or
    20 ms past their time, on a quiet flow)."""

    reorder_percent: float = Percent
    """The share of packets held back to arrive after later ones, in percent (0-100)."""
    reorder_gap: int = Field(default=3, ge=1, le=1000)
    """How many later packets overtake a held one (on a quiet flow it leaves at most 20 ms
    late)."""


class CorruptFields(Model):
    """`corrupt_percent` of packets with one bit flipped and checksums left stale: the receiver
    discards them and TCP retransmits."""

    corrupt_percent: float = Percent
    """The share of packets with one bit flipped and their checksum left stale, in percent
    (0-100): the receiver discards them and TCP retransmits."""


class PathParams(ImpairFlow, LatencyFields, LossFields, RateFields, DuplicateFields,
                 ReorderFields, CorruptFields):
    """Any impairments at once, on the chosen direction and flows."""

    IMPAIRMENTS: ClassVar[tuple[str, ...]] = ("latency_ms", "loss_percent", "rate_kbps",
                                              "duplicate_percent", "reorder_percent",
                                              "corrupt_percent")
    model_config = ConfigDict(json_schema_extra={
        "anyOf": [{"required": [name]} for name in IMPAIRMENTS]})

    def plan(self) -> Plan:
        """Which mechanism does what: tbf for the rate, `statistic` for independent loss, the
        userspace queue for the rest (and for loss in bursts)."""
        bursty = self.loss_burst_packets > 1
        queued = ("latency_ms" in self.model_fields_set or bursty or self.duplicate_percent > 0
                  or self.reorder_percent > 0 or self.corrupt_percent > 0)
        shape = Shape(
            latency_s=self.latency_ms / 1000, jitter_s=self.jitter_ms / 1000,
            distribution=self.distribution, keep_order=self.keep_order,
            loss=self.loss_percent / 100 if bursty else 0.0, loss_burst=self.loss_burst_packets,
            duplicate=self.duplicate_percent / 100, reorder=self.reorder_percent / 100,
            reorder_gap=self.reorder_gap, corrupt=self.corrupt_percent / 100,
        ) if queued else None
        rate = self.rate_kbps * 1000 / 8 if self.rate_kbps is not None else None
        return Plan(shape, 0.0 if bursty else self.loss_percent / 100, rate,
                    int(rate * self.queue_ms / 1000) if rate is not None else 0)

    @model_validator(mode="after")
    def _names_an_impairment(self) -> Self:
        if not self.model_fields_set & set(self.IMPAIRMENTS):
            raise ValueError(f"path needs at least one impairment ({', '.join(self.IMPAIRMENTS)})")
        return self


def as_path(params: ImpairFlow) -> PathParams:
    """Any impairment's parameters as `path` parameters, keeping which fields the step gave."""
    given: dict[str, Any] = params.model_dump(exclude_unset=True)
    return PathParams.model_validate(given)


def egress_links(lab: Lab, p: PathParams) -> list[str]:
    """The router interfaces the hurt directions leave by."""
    return [lab.target_link if d == "to_server" else lab.client_link
            for d in hurt_directions(p.direction)]


class Impairment[P: ImpairFlow](Fault[P]):
    """A fault made of packet impairments at the router (the `path` fault and its single
    parts): everything it installs is removed by `revert`, in reverse."""

    layer: ClassVar[Layer] = "packet"
    # The userspace queue, unless a part's other mechanism says otherwise (loss, rate, path).
    mechanism: ClassVar[str] = "NFQUEUE userspace queue at the router"
    # The directions each step's queue serves, per router: held as long as its lab's router
    # namespace is (a later lab in the same slot has a new one, and starts with none).
    _queued: ClassVar[weakref.WeakKeyDictionary[Namespace, dict[str, set[OneWay]]]] = (
        weakref.WeakKeyDictionary())

    def __init__(self, step_id: str, params: P) -> None:
        super().__init__(step_id, params)
        self.path = as_path(params)
        self.plan = self.path.plan()
        self._worker: asyncio.subprocess.Process | None = None
        # What the userspace queue saw, once reverted (fault.reverted's `queues`).
        self.queue_tally: list[QueueTally] = []
        self._shaped: list[str] = []
        self._tables: list[str] = []
        # The proxied path's legs (faultlab.faults.legs): loss rules, queue rules.
        self._legs = {table: LegChain(step_id, table) for table in ("filter", QUEUE_TABLE)}

    async def apply(self, ctx: FaultContext) -> dict[str, Any]:
        p, plan, router = self.path, self.plan, ctx.lab.router
        matches = iptables_matches(ctx, p.direction, p.connection, at_client=False)
        ways = set(hurt_directions(p.direction))
        queued = self._queued.setdefault(router, {})
        if plan.shape is not None:
            for step, taken in queued.items():
                if taken & ways:
                    raise MechanismError(
                        f"step {step!r} already queues {'/'.join(sorted(taken & ways))} packets "
                        "at the router (a packet reaches one queue): put both in one `path`")
            # Taken at once: another step applied meanwhile (both at 0 s) must see it.
            queued[self.step_id] = ways
        chain = chain_name(self.step_id)
        on_legs, conn = (leg_matches(ctx, p.direction, p.connection) if proxied(ctx)
                         else ([], None))
        try:
            if plan.rate_bytes_s is not None:
                links = egress_links(ctx.lab, p)
                await router.run(add_tbf, links, plan.rate_bytes_s, plan.burst_bytes,
                                 plan.queue_bytes)
                self._shaped = links
            if plan.loss_probability:
                await install(router, ["FORWARD"], chain, [
                    f"{m} -m statistic --mode random --probability "
                    f"{plan.loss_probability:.6f} -j DROP" for m in matches])
                self._tables.append("filter")
                if on_legs:
                    await self._legs["filter"].install(
                        ctx, on_legs, conn, lambda i: f"-m statistic --mode random --probability "
                        f"{plan.loss_probability:.6f} -j DROP")
            queues: list[int] = []
            if plan.shape is not None:
                queues = await self._queue(ctx, matches, on_legs, conn, plan.shape)
        except BaseException:
            await self.revert(ctx)
            raise
        hurt = [leg for leg in LEGS if any(leg in chain.legs for chain in self._legs.values())]
        legs = {"legs": hurt} if hurt else {}
        return {"direction": p.direction, "connection": p.connection,
                "mechanisms": plan.mechanisms(), "queues": queues, **legs,
                **p.model_dump(exclude={"direction", "connection"}, exclude_unset=True)}

    async def _queue(self, ctx: FaultContext, matches: list[str], on_legs: list[LegMatch],
                     conn: Connection | None, shape: Shape) -> list[int]:
        """The userspace queue: a lane per match, on the direct path and on the legs; the
        delay is the client leg's alone (on both legs it would count twice end to end), the
        rest of the shape acts on both legs."""
        leg_shapes = {"client": shape, "server": shape.undelayed()}
        queued = [m for m in on_legs if leg_shapes[m.leg] is not None]
        shapes = [shape] * len(matches) + [s for m in queued
                                           if (s := leg_shapes[m.leg]) is not None]
        self._worker, queues = await start_worker(ctx.lab, shape, len(shapes),
                                                  shapes if queued else None)
        # In the security table, whose FORWARD chain runs after filter's: another step's
        # drop or reject still acts on what a queue would accept. --queue-bypass: should
        # the worker die, packets pass instead of piling up.
        await install(ctx.lab.router, ["FORWARD"], chain_name(self.step_id), [
            f"{m} -j NFQUEUE --queue-num {q} --queue-bypass"
            for m, q in zip(matches, queues[:len(matches)], strict=True)], table=QUEUE_TABLE)
        self._tables.append(QUEUE_TABLE)
        on_legs_queues = queues[len(matches):]

        def target(i: int) -> str:
            # What the proxy sends crosses OUTPUT, as the worker's own duplicates do.
            unmarked = "" if queued[i].inbound else f"-m mark ! --mark {DUPLICATE_MARK:#x} "
            return f"{unmarked}-j NFQUEUE --queue-num {on_legs_queues[i]} --queue-bypass"

        if queued:
            await self._legs[QUEUE_TABLE].install(ctx, queued, conn, target)
        return queues

    def queue_tallies(self) -> list[dict[str, int]] | None:
        return [t.to_json() for t in self.queue_tally] or None

    async def revert(self, ctx: FaultContext) -> None:
        router = ctx.lab.router
        # Rules first, the queue's last, so that no packet is queued to a worker that is
        # leaving; the worker then lets what it holds go before it exits. Each part is undone
        # even when one before it failed (the first failure is raised after).
        try:
            try:
                await self._legs["filter"].uninstall(ctx)
            finally:
                try:
                    await self._legs[QUEUE_TABLE].uninstall(ctx)
                finally:
                    while self._tables:
                        await uninstall(router, ["FORWARD"], chain_name(self.step_id),
                                        table=self._tables.pop())
        finally:
            try:
                if self._worker is not None:
                    worker, self._worker = self._worker, None
                    self.queue_tally = await stop_worker(worker)
            finally:
                self._queued.get(router, {}).pop(self.step_id, None)
                if self._shaped:
                    shaped, self._shaped = self._shaped, []
                    await router.run(remove_tbf, shaped)
