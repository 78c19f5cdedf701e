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


def refinements(measured: Mapping[Point, Measured], step: float) -> list[Point]:
    """Between two one-step points that differ only in `after` (or only in `duration`) and whose
    outcomes differ, the point half-way, while they are more than `step` apart."""
    if step <= 0:
        return []
    proposed: dict[str, Point] = {}
    axes: list[tuple[Callable[[Placement], float | None], Callable[[Placement], tuple[object, ...]],
                     Callable[[Placement, float], Placement]]] = [
        (lambda p: p.after, lambda p: (p.boundary, p.variant, p.duration),
         lambda p, v: replace(p, after=v)),
        (lambda p: p.duration, lambda p: (p.boundary, p.after, p.variant),
         lambda p, v: replace(p, duration=v)),
    ]
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
                middle = _ms((low + high) / 2)
                if was != then and high - low > step + 1e-9 and low < middle < high:
                    point = Point((moved(placed, middle),))
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
