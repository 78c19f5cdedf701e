"""A point as a profile: the base profile with the point's steps on its timeline.

Every point's run is an ordinary profile (written to the exploration's `points/`), so a point is
rerun with `faultlab run` as it ran here, and a minimal failing schedule is a profile to commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from faultlab.explore.space import Boundary, Placement, Point, Variant
from faultlab.model import format_seconds

# A profile name's limit (faultlab.profile): a point's name keeps its base's start.
NAME_CHARS = 64


def step_id(index: int) -> str:
    return f"x{index + 1}"


def steps_of(point: Point, found: Sequence[Boundary],
             faults: Sequence[Variant]) -> list[dict[str, Any]]:
    """The timeline steps a point adds: each placement, and a restore where it lasts a while."""
    steps: list[dict[str, Any]] = []
    for i, placed in enumerate(point.steps):
        steps += _placed(step_id(i), placed, found[placed.boundary], faults[placed.variant])
    return steps


def _placed(sid: str, placed: Placement, boundary: Boundary,
            variant: Variant) -> list[dict[str, Any]]:
    step: dict[str, Any] = {"id": sid, "when": boundary.trigger()}
    if placed.after:
        step["after"] = format_seconds(placed.after)
    step["do"] = variant.do
    if placed.duration is None:
        return [step]
    return [step, {"id": f"{sid}-end", "when": {"step": sid},
                   "after": format_seconds(placed.duration),
                   "do": {"fault": "restore", "faults": [sid]}}]


def profile_text(base: dict[str, Any], name: str, steps: Sequence[dict[str, Any]],
                 comments: Sequence[str] = ()) -> str:
    """The YAML of `base` (a profile as written, without its `explore:` block) named `name`,
    with `steps` after its own timeline, and `comments` on top."""
    data = {k: v for k, v in base.items() if k != "explore"}
    timeline = [*data.get("timeline", []), *steps]
    ordered: dict[str, Any] = {"name": name}
    if "description" in data:
        ordered["description"] = data["description"]
    for key, value in data.items():  # the timeline where the base has it, else before expect
        if key in ("name", "description"):
            continue
        if key == "expect" and "timeline" not in data:
            ordered["timeline"] = timeline
        ordered[key] = timeline if key == "timeline" else value
    ordered.setdefault("timeline", timeline)
    body = yaml.dump(ordered, Dumper=_Dumper, sort_keys=False, default_flow_style=None,
                     width=100, allow_unicode=True)
    head = "".join(f"# {line}".rstrip() + "\n" for line in comments)
    return head + body


class _Dumper(yaml.SafeDumper):
    """YAML as profiles are written by hand: a long text folded (`>`), the rest as safe_dump."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    folded = len(value) > 80 and "\n" not in value.rstrip("\n")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=">" if folded else None)


_Dumper.add_representer(str, _text)


def point_name(base_name: str, suffix: str) -> str:
    """`<base>-<suffix>`, the base cut so that the name fits a profile's limit."""
    return f"{base_name[:NAME_CHARS - len(suffix) - 1]}-{suffix}"
