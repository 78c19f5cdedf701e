"""Where to look next, from what was measured: refinement where the verdict flips, and the
simpler schedules that shrinking tries. Pure: the exploration runs what these propose."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from faultlab.explore.journal import Measured
from faultlab.explore.space import Placement, Point, _ms

# Outcomes that say nothing of a point's fault: never a side of a flip.
SILENT = ("error", "unfired")


def refinements(measured: Mapping[Point, Measured], step: float, jobs: int = 1) -> list[Point]:
    """Between two one-step points that differ only in `after` (or only in `duration`) and whose
    outcomes differ, while they are more than `step` apart: the point half-way, or with `jobs`
    to spare for each such gap, the points that split it in 4, 8, ... (the next rounds'
    halves at once, as many as the jobs allow and the step asks: the points bisection would
    reach, in fewer rounds of runs)."""
    if step <= 0:
        return []
    axes: list[tuple[Callable[[Placement], float | None], Callable[[Placement], tuple[object, ...]],
                     Callable[[Placement, float], Placement]]] = [
        (lambda p: p.after, lambda p: (p.boundary, p.variant, p.duration),
         lambda p, v: replace(p, after=v)),
        (lambda p: p.duration, lambda p: (p.boundary, p.after, p.variant),
         lambda p, v: replace(p, duration=v)),
    ]
    gaps: list[tuple[float, float, Placement, Callable[[Placement, float], Placement]]] = []
    for value_of, rest_of, moved in axes:
        rows: dict[tuple[object, ...], list[tuple[float, Placement, str]]] = {}
        for point, run in measured.items():
            if len(point.steps) != 1 or run.outcome in SILENT:
                continue
            placed = point.steps[0]
            value = value_of(placed)
            if value is not None:
                rows.setdefault(rest_of(placed), []).append((value, placed, run.outcome))
        for row in rows.values():
            row.sort(key=lambda item: item[0])
            for (low, placed, was), (high, _, then) in itertools.pairwise(row):
                if was != then and high - low > step + 1e-9 and low < _ms((low + high) / 2) < high:
                    gaps.append((low, high, placed, moved))
    # Each gap in 2**depth parts: as deep as the jobs spare for it (2**depth - 1 points) and
    # no deeper than bisection would go before the parts are `step` or less.
    spare = max(1, jobs // max(1, len(gaps)))
    proposed: dict[str, Point] = {}
    for low, high, placed, moved in gaps:
        depth = 1
        while 2 ** (depth + 1) - 1 <= spare and (high - low) / 2 ** depth > step + 1e-9:
            depth += 1
        for i in range(1, 2 ** depth):
            value = _ms(low + (high - low) * i / 2 ** depth)
            if low < value < high:
                point = Point((moved(placed, value),))
                proposed.setdefault(point.key, point)
    return [p for p in proposed.values() if p not in measured]


def simpler(point: Point, durations: Sequence[float | None], moments: Sequence[float],
            step: float) -> list[Point]:
    """Schedules simpler than `point` by one move (a step left out, a simpler fault, a shorter
    duration, an earlier trigger: an earlier message or less time after it), simplest first;
    `moments` are the boundaries' times in the unhurt session."""
    out: dict[str, Point] = {}
    simplicity = point.simplicity(moments)

    def offer(steps: Sequence[Placement]) -> None:
        candidate = Point(tuple(sorted(steps)))
        if candidate.simplicity(moments) < simplicity:
            out.setdefault(candidate.key, candidate)

    steps = list(point.steps)
    if len(steps) > 1:
        for i in range(len(steps)):
            offer(steps[:i] + steps[i + 1:])
    for i, placed in enumerate(steps):
        moves = [replace(placed, variant=v) for v in range(placed.variant)]
        moves += [replace(placed, duration=d) for d in durations
                  if d is not None and (placed.duration is None or d < placed.duration)]
        if placed.duration is not None and placed.duration / 2 >= step > 0:
            moves.append(replace(placed, duration=_ms(placed.duration / 2)))
        if placed.after > 0:
            moves.append(replace(placed, after=0.0))
            if placed.after / 2 >= step > 0:
                moves.append(replace(placed, after=_ms(placed.after / 2)))
        # An earlier message, at the same moment or earlier.
        moves += [replace(placed, boundary=b) for b in range(placed.boundary)]
        moves += [replace(placed, boundary=b, after=0.0) for b in range(placed.boundary)]
        for move in moves:
            offer([*steps[:i], move, *steps[i + 1:]])
    return sorted(out.values(), key=lambda c: c.simplicity(moments))


def simplest(points: Sequence[Point], moments: Sequence[float]) -> Point:
    return min(points, key=lambda p: p.simplicity(moments))
