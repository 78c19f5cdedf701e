"""A profile's timeline: when each step fires (its trigger) and the fault it applies, validated
by the model the fault's own module registers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from faultlab.faults import FAULTS, FaultParams, Need
from faultlab.frames import FrameMatch
from faultlab.model import Duration, Model, validate_plain
from faultlab.problems import Loc, Problems

STEP_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,23}$")


class Trigger(Model):
    """When a step fires: at a time since the client started, after another step, on an event,
    on the k-th connection, or on a WebSocket message (`frame`)."""

    at: Duration | None = None
    """At this time since the client started (its `process.start`, when the lab, the target and
    the proxy are ready): `1.5s`."""
    step: str | None = None
    """When the step with this id has had its fault applied."""
    event: str | None = None
    """On an event of this name (any source, usually the client's own): `client.connected`."""
    where: dict[str, Any] = Field(default_factory=dict)
    """With `event`: the fields the event must have, each equal to its value (`{attempt: 2}`)."""
    connection: int | None = Field(default=None, ge=1)
    """When the capture sees the SYN of the client's k-th connection toward the target (from 1)."""
    frame: FrameMatch | None = None
    """On a WebSocket message, from the proxy's frame log or else the emulator's."""
    KINDS: ClassVar[tuple[str, ...]] = ("at", "step", "event", "connection", "frame")
    model_config = ConfigDict(json_schema_extra={
        "oneOf": [{"required": [kind]} for kind in KINDS],
        "dependentRequired": {"where": ["event"]}})

    @model_validator(mode="after")
    def _one_kind(self) -> Trigger:
        kinds = [k for k in self.KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of 'at', 'step', 'event', 'connection' or 'frame'")
        if self.where and self.event is None:
            raise ValueError("'where' goes with 'event'")
        return self

    def describe(self) -> str:
        if self.at is not None:
            return f"at {self.at:g}s"
        if self.step is not None:
            return f"after step {self.step}"
        if self.event is not None:
            where = ", ".join(f"{k}={v!r}" for k, v in self.where.items())
            return f"on {self.event}" + (f"({where})" if where else "")
        if self.frame is not None:
            return f"on frame {self.frame.describe()}"
        return f"on connection #{self.connection}"


class RawStep(Model):
    """A timeline step as written; `do` is checked by the fault it names."""

    id: str | None = Field(default=None, json_schema_extra={"pattern": STEP_ID.pattern})
    """The step's name, for `when: {step: ...}` and the events: a letter, then up to 23 letters,
    digits, `_` or `-`; absent: `step1`, `step2`, ... by its place."""
    when: Trigger
    """When the step fires: exactly one of `at`, `step`, `event`, `connection` or `frame`."""
    after: Duration = 0.0
    """How long after its trigger the fault is applied."""
    do: dict[str, Any]
    """The fault to apply (`fault`) and its parameters."""

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str | None) -> str | None:
        if value is not None and not STEP_ID.match(value):
            raise ValueError("a step id is a letter then up to 23 letters, digits, '_' or '-'")
        return value


@dataclass(frozen=True)
class Step:
    """A validated timeline step: when it fires, how long after, and the fault it applies."""

    id: str
    when: Trigger
    after: float
    fault: str
    params: FaultParams

    @property
    def needs(self) -> frozenset[Need]:
        return FAULTS[self.fault].needs


def check_fault(index: int, do: dict[str, Any], problems: Problems) -> tuple[str, FaultParams] | None:
    """The fault step `index` names in `do`, and its parameters as that fault validates them."""
    loc: Loc = ("timeline", index, "do")
    name = do.get("fault")
    if not isinstance(name, str):
        problems.add((*loc, "fault"), f"name a fault: one of {', '.join(sorted(FAULTS))}")
        return None
    fault = FAULTS.get(name)
    if fault is None:
        problems.add((*loc, "fault"), f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
        return None
    settings = {k: v for k, v in do.items() if k != "fault"}
    try:
        params = validate_plain(fault.Params, settings)
    except ValidationError as exc:
        problems.add_validation(loc, exc, settings)
        return None
    return name, params


def check_steps(raw_steps: Iterable[RawStep], problems: Problems) -> list[Step]:
    """The steps whose faults validate, each with its id; every problem goes to `problems`."""
    steps: list[Step] = []
    raw_list = list(raw_steps)
    ids = [s.id or f"step{i + 1}" for i, s in enumerate(raw_list)]
    for i, step_id in enumerate(ids):
        if ids.index(step_id) != i:
            problems.add(("timeline", i, "id"), f"step id {step_id!r} is used twice")
    for i, raw in enumerate(raw_list):
        if raw.when.step is not None and raw.when.step not in ids:
            problems.add(("timeline", i, "when", "step"), f"no step has the id {raw.when.step!r}")
        if raw.when.step == ids[i]:
            problems.add(("timeline", i, "when", "step"), "a step cannot wait for itself")
        checked = check_fault(i, raw.do, problems)
        if checked is None:
            continue
        name, params = checked
        frame = raw.when.frame
        if frame is not None and frame.reads_content and "proxy" not in FAULTS[name].needs:
            problems.add(("timeline", i, "when", "frame"),
                         "'forward: before', 'equals' and 'regex' need a fault that lives in the "
                         "proxy (the proxy fires those); others follow a frame's kind only")
        if frame is not None and frame.forward == "before" and raw.after > 0:
            problems.add(("timeline", i, "after"), "'forward: before' acts on the message itself,"
                         " before it is relayed: it cannot wait 'after' it")
        for ref in params.referenced_steps():
            if ref not in ids:
                problems.add(("timeline", i, "do"), f"no step has the id {ref!r}")
        steps.append(Step(ids[i], raw.when, raw.after, name, params))
    return steps
