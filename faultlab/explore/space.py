"""The space an exploration searches, as a profile's `explore:` block declares it, and its points.

A point places one or two fault steps: each fires at a message boundary of the unhurt session
(`Boundary`: the n-th message of a kind from one side, as the first, unhurt run saw it), some time
`after` it, applies one of the listed faults (a `Variant`: a fault with its parameters, a field
written `{one_of: [...]}` searched over), and lasts a `duration` (a `restore` step ends it) or to
the run's end. Discrete fields are enumerated; an `after` or `duration` written as a range with
`draw` is sampled from the seed; two-step points are drawn. The order faults are listed in is
their simplicity: shrinking prefers the earlier.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from faultlab.faults import FAULTS
from faultlab.model import Duration, Model, format_seconds, validate_plain
from faultlab.problems import Loc, Problems
from faultlab.units import parse_duration

PLACEMENT_KEY = re.compile(r"b(\d+)\+([0-9.]+m?s)/f(\d+)/(end|[0-9.]+m?s)")
# A space larger than this is refused before anything runs (the budget cuts a large one anyway).
MAX_POINTS = 100_000
# Offsets and durations are kept to the millisecond: a profile writes them so.
RESOLUTION_S = 0.001
# At least this many consecutive messages of one kind from one side are a stream (audio chunks):
# its first and last message are boundaries, the ones between are not.
STREAM_RUN = 3


class Span(Model):
    """Seconds from `from` to `to`: every `step`, or `draw` values drawn from the seed."""

    low: Duration = Field(alias="from")
    """The first value, e.g. `0s`."""
    high: Duration = Field(alias="to")
    """The last value, e.g. `3s` (not before `from`)."""
    step: Duration | None = None
    """Every value from `from` to `to` this far apart, e.g. `500ms` (at most 1000 values)."""
    draw: int | None = Field(default=None, ge=1, le=1000)
    """This many values drawn between `from` and `to` from the seed (1-1000), kept to the
    millisecond. Give exactly one of `step` and `draw`."""

    @model_validator(mode="after")
    def _shape(self) -> Span:
        if self.low > self.high:
            raise ValueError("'from' is after 'to'")
        if (self.step is None) == (self.draw is None):
            raise ValueError("give exactly one of 'step' (every value) or 'draw' (sampled)")
        if self.step is not None and (self.step <= 0 or self._stepped(self.step) > 1000):
            raise ValueError("'step' must be above zero and give at most 1000 values")
        return self

    def _stepped(self, step: float) -> int:
        """How many values `step` gives: `from`, then every `step` up to `to`."""
        return math.floor((self.high - self.low) / step + 1e-9) + 1

    def values(self, rng: random.Random) -> list[float]:
        if self.step is not None:
            return [_ms(self.low + i * self.step) for i in range(self._stepped(self.step))]
        assert self.draw is not None
        return sorted({_ms(rng.uniform(self.low, self.high)) for _ in range(self.draw)})


class Boundaries(Model):
    """Where a step may fire: after messages from `from` (server, client, either), of `kinds`
    (every kind when empty; matched as frame triggers match), the `first` n of each kind only."""

    sender: Literal["server", "client", "either"] = Field(default="server", alias="from")
    """Whose messages: `server`, `client` or `either`."""
    kinds: list[str] = Field(default_factory=list)
    """The message kinds, spelt as frame triggers spell them (`toolCall`,
    `serverContent.turnComplete`); empty: every kind."""
    first: int | None = Field(default=None, ge=1)
    """Only the first N messages of each kind (counted over every connection); absent: all."""


def _to_the_end() -> list[float | Literal["end"]]:
    return ["end"]


class Space(Model):
    """A profile's `explore:` block (docs/guide/exploring.md)."""

    at: Boundaries = Boundaries()
    """Where a step fires: after which messages of the unhurt run; by default after every message
    the server sends."""
    after: list[Duration] | Span = Field(default_factory=lambda: [0.0])
    """How long after the message the fault is applied: a list (`[0s, 500ms]`) or a range
    (`{from: 0s, to: 3s, step: 1s}`, or with `draw: N` instead of `step`)."""
    faults: list[dict[str, Any]] = Field(min_length=1)
    """The faults to place, simplest first (shrinking prefers the earlier), each written as a
    step's `do`; a field written `{one_of: [...]}` takes each value in turn."""
    duration: list[Duration | Literal["end"]] | Span = Field(default_factory=_to_the_end)
    """How long a fault lasts before a `restore` step ends it: a list of durations and `end` (to
    the run's end, the default), or a range as for `after`."""
    steps: list[Literal[1, 2]] = Field(default_factory=lambda: [1])  # type: ignore[arg-type]
    """`[1]`, `[2]` or `[1, 2]`: points of one fault, or of two in sequence (drawn: see `draw`)."""
    draw: int = Field(default=20, ge=0, le=MAX_POINTS)
    """How many two-step points to draw from the seed (when `steps` has 2)."""
    seed: int = 0
    """The seed of every draw: the same seed, the same exploration."""
    refine: Duration = 0.1
    """Bisect between a passing and a failing point that differ only in `after` (or only in
    `duration`) until they are this close, e.g. `250ms`; `0s`: never."""
    confirm: int = Field(default=3, ge=1, le=20)
    """Reruns of each minimal profile (1-20): it is confirmed when every rerun fails as it did."""
    runs: int | None = Field(default=None, ge=1)
    """The budget: at most this many runs in all (as `--runs`); absent: no limit."""
    time: Duration | None = None
    """The budget: no run started after this long, e.g. `20m` (as `--time`); absent: no limit."""

    @field_validator("steps")
    @classmethod
    def _steps(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("give 1, 2 or both")
        return sorted(set(value))

    def axes(self) -> tuple[list[float], list[float | None]]:
        """The offsets and the durations to try, sorted (None: to the run's end, last); those
        drawn are drawn from the seed, offsets first."""
        rng = random.Random(self.seed)
        afters = (self.after.values(rng) if isinstance(self.after, Span)
                  else sorted({_ms(a) for a in self.after}))
        if isinstance(self.duration, Span):
            return afters, list(self.duration.values(rng))
        finite = sorted({_ms(d) for d in self.duration if d != "end"})
        return afters, [*finite, *([None] if "end" in self.duration else [])]


def _ms(seconds: float) -> float:
    return round(round(seconds / RESOLUTION_S) * RESOLUTION_S, 3)


@dataclass(frozen=True)
class Variant:
    """One fault with its parameters, as a step's `do` writes it."""

    fault: str
    params: tuple[tuple[str, Any], ...]

    @property
    def do(self) -> dict[str, Any]:
        return {"fault": self.fault, **dict(self.params)}

    def describe(self) -> str:
        shown = ", ".join(f"{k}: {json.dumps(v)}" for k, v in self.params)
        return f"{self.fault}" + (f" ({shown})" if shown else "")


def variants(templates: Sequence[dict[str, Any]], problems: Problems,
             loc: Loc = ("explore", "faults")) -> list[Variant]:
    """Every fault the templates name, a field written `{one_of: [...]}` taking each value in
    turn, each validated by its fault (problems at `loc`); in the templates' order."""
    out: list[Variant] = []
    for i, template in enumerate(templates):
        name = template.get("fault")
        if not isinstance(name, str) or name not in FAULTS:
            problems.add((*loc, i, "fault"), f"name a fault: one of {', '.join(sorted(FAULTS))}")
            continue
        fields = {k: v for k, v in template.items() if k != "fault"}
        choices = []
        for key, value in fields.items():
            if isinstance(value, dict) and set(value) == {"one_of"}:
                if not isinstance(value["one_of"], list) or not value["one_of"]:
                    problems.add((*loc, i, key, "one_of"), "a list of at least one value")
                    break
                choices.append([(key, v) for v in value["one_of"]])
            else:
                choices.append([(key, value)])
        else:
            for combo in itertools.product(*choices):
                settings = dict(combo)
                try:
                    validate_plain(FAULTS[name].Params, settings)
                except ValidationError as exc:
                    problems.add_validation((*loc, i), exc, settings)
                    break
                out.append(Variant(name, tuple(combo)))
    return out


@dataclass(frozen=True)
class Boundary:
    """The `nth` message of `kind` from `sender` in the unhurt session (counted over every
    connection, as a frame trigger counts), where it came among the boundaries (`index`), and
    when (`t`: seconds since the session's first message)."""

    index: int
    sender: str
    kind: str
    nth: int
    t: float = 0.0

    def trigger(self) -> dict[str, Any]:
        frame: dict[str, Any] = {"from": self.sender, "kind": self.kind}
        return {"frame": frame | ({"nth": self.nth} if self.nth > 1 else {})}

    def describe(self) -> str:
        return f"{self.sender} {self.kind}" + (f" #{self.nth}" if self.nth > 1 else "")

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "from": self.sender, "kind": self.kind, "nth": self.nth,
                "t": self.t}

    @classmethod
    def of(cls, d: dict[str, Any]) -> Boundary:
        return cls(d["index"], d["from"], d["kind"], d["nth"], d.get("t", 0.0))


def boundaries(messages: Iterable[tuple[str, str, float]], space: Boundaries,
               matches: Any) -> list[Boundary]:
    """The boundaries of a session whose messages were `(sender, kind, t)` in order; `matches(
    kind, wanted)` is the run's protocol's kind matching (the frame trigger's). A run of
    `STREAM_RUN` or more messages of one kind from one side gives its first and last only."""
    listed = list(messages)
    start = listed[0][2] if listed else 0.0
    counts: dict[tuple[str, str], int] = {}
    numbered = []
    moments = []
    for sender, kind, t in listed:
        counts[sender, kind] = counts.get((sender, kind), 0) + 1
        numbered.append((sender, kind, counts[sender, kind]))
        moments.append(round(t - start, 3))
    keep = []
    for i, (sender, kind, nth) in enumerate(numbered):
        start = i
        while start > 0 and numbered[start - 1][:2] == (sender, kind):
            start -= 1
        end = i
        while end + 1 < len(numbered) and numbered[end + 1][:2] == (sender, kind):
            end += 1
        if end - start + 1 >= STREAM_RUN and i not in (start, end):
            continue
        if space.sender != "either" and sender != space.sender:
            continue
        if space.kinds and not any(matches(kind, wanted) for wanted in space.kinds):
            continue
        if space.first is not None and nth > space.first:
            continue
        keep.append((sender, kind, nth, moments[i]))
    return [Boundary(i, *b) for i, b in enumerate(keep)]


@dataclass(frozen=True, order=True)
class Placement:
    """One explored step: at boundary `boundary` (an index), `after` seconds later, the fault
    `variant` (an index: lower is simpler), lasting `duration` seconds (None: to the end)."""

    boundary: int
    after: float
    variant: int
    duration: float | None

    def key(self) -> str:
        lasting = "end" if self.duration is None else format_seconds(self.duration)
        return f"b{self.boundary}+{format_seconds(self.after)}/f{self.variant}/{lasting}"

    @classmethod
    def parse(cls, key: str) -> Placement:
        """The placement `key()` wrote; a ValueError for anything else."""
        match = PLACEMENT_KEY.fullmatch(key.strip())
        if match is None:
            raise ValueError(f"not a point's step: {key!r}")
        boundary, after, variant, lasting = match.groups()
        return cls(int(boundary), parse_duration(after), int(variant),
                   None if lasting == "end" else parse_duration(lasting))


@dataclass(frozen=True)
class Point:
    """A schedule of one or two placements, in firing order."""

    steps: tuple[Placement, ...]

    @property
    def key(self) -> str:
        """The point's name in the journal and in explore.json: the same on every machine."""
        return " ; ".join(p.key() for p in self.steps)

    @classmethod
    def parse(cls, key: str) -> Point:
        return cls(tuple(Placement.parse(part) for part in key.split(";")))

    @property
    def id(self) -> str:
        """A short, stable name for its profile and run folder."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:8]

    def simplicity(self, moments: Sequence[float]) -> tuple[Any, ...]:
        """What shrinking minimises, in this order: fewer steps, simpler faults, shorter
        durations, earlier triggers (by when they fire in the unhurt session: `moments` are the
        boundaries' times), then fewer seconds waited after a message."""
        return (len(self.steps), tuple(p.variant for p in self.steps),
                tuple(math.inf if p.duration is None else p.duration for p in self.steps),
                tuple(round(moments[p.boundary] + p.after, 3) for p in self.steps),
                tuple(p.after for p in self.steps))


def grid(space: Space, found: Sequence[Boundary], count: int) -> list[Point]:
    """Every point the space enumerates (one-step points) and draws (two-step points), the same
    for the same seed and boundaries; `count` is the number of fault variants."""
    rng = random.Random(space.seed + 1)  # the axes' draws are their own
    afters, durations = space.axes()
    singles = [Placement(b.index, a, v, d) for b in found for a in afters
               for v in range(count) for d in durations]
    points = [Point((p,)) for p in singles] if 1 in space.steps else []
    if 2 in space.steps and len(singles) > 1:
        drawn: dict[str, Point] = {}
        for _ in range(space.draw * 20):
            if len(drawn) >= space.draw:
                break
            point = Point(tuple(sorted(rng.sample(singles, 2))))
            drawn.setdefault(point.key, point)
        points += list(drawn.values())
    return points


def count_points(space: Space, boundary_count: int, variant_count: int) -> int:
    """How many points `grid` would make (checked against MAX_POINTS before it makes them)."""
    afters, durations = space.axes()
    singles = boundary_count * len(afters) * variant_count * len(durations)
    return (singles if 1 in space.steps else 0) + (space.draw if 2 in space.steps else 0)
