"""What an exploration found: explore.json (every point, its verdict and failed expectations;
each distinct failure with its minimal schedule and confirmation), the minimal profiles, and
explore.html (faultlab.explore.page).

explore.json is the same for the same profile, space, seed and verdicts, wherever its runs were
made: where each run's folder is and how long it took are kept apart, under `runs`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from faultlab.explore.exploration import Exploration, Finding, describe
from faultlab.explore.journal import BASELINE
from faultlab.explore.space import Point
from faultlab.private import write_private

RESULT = "explore.json"
PAGE = "explore.html"
MINIMAL = "minimal"
FORMAT = 1


def point_dict(exploration: Exploration, point: Point) -> dict[str, Any]:
    found, faults = exploration.found, exploration.variants
    return {"key": point.key, "id": point.id, "describe": describe(point, found, faults),
            "steps": [{"at": found[p.boundary].to_dict(), "after": p.after,
                       "fault": faults[p.variant].do, "duration": p.duration}
                      for p in point.steps]}


def write_minimal(exploration: Exploration) -> None:
    """A standalone profile per finding, in `minimal/`, commented with how it was found."""
    folder = exploration.folder / MINIMAL
    for number, finding in enumerate(exploration.findings, 1):
        folder.mkdir(exist_ok=True)
        suffix = f"min{number}"
        failed = finding.outcome.removeprefix("fail: ")
        comments = [
            f"Found by `faultlab explore` (seed {exploration.space.seed}) from the profile "
            f"{exploration.base.name}:",
            "the simplest schedule that still fails the way "
            f"{finding.points} explored point(s) failed:",
            f"  {describe(finding.minimal, exploration.found, exploration.variants)}",
            f"Failed expectations: {failed}",
            (f"Confirmed: failed {finding.confirmation} runs"
             + (" (FLAKY: not every rerun failed so)" if finding.flaky else "") + "."
             if finding.confirmed else "Not confirmed: the budget ran out before its reruns."),
            f"Rerun: faultlab run {MINIMAL}/{_slug(exploration.base.name)}-{suffix}.yaml",
            "",
        ]
        schedule = describe(finding.minimal, exploration.found, exploration.variants)
        about = (f"{exploration.base.name}, hurt by the simplest schedule `faultlab explore` found "
                 f"that fails it ({failed}): {schedule}. {exploration.base.description}").strip()
        text = exploration.profile_text(finding.minimal, comments, suffix, about)
        path = folder / f"{_slug(exploration.base.name)}-{suffix}.yaml"
        path.write_text(text)
        finding.profile = str(path.relative_to(exploration.folder))


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)


def summary(exploration: Exploration, stopped: str | None) -> dict[str, Any]:
    """explore.json's content."""
    measured = exploration.measured()
    points = []
    for point in sorted(measured, key=lambda p: p.key):
        run = measured[point]
        points.append({**point_dict(exploration, point), "purpose": run.purpose,
                       "outcome": run.outcome, "verdict": run.verdict,
                       "failed": list(run.failed), "unfired": run.unfired,
                       **({"error": run.error} if run.error else {})})
    baseline = exploration.journal.first(BASELINE)
    runs: dict[str, list[dict[str, Any]]] = {}
    for run in exploration.journal.runs:
        runs.setdefault(run.key, []).append({"purpose": run.purpose, "repeat": run.repeat,
                                             "run_dir": run.run_dir,
                                             "duration_s": run.duration_s})
    return {
        "format": FORMAT,
        "profile": exploration.base.name,
        "profile_sha256": exploration.journal.head.profile_sha256
        if exploration.journal.head else "",
        "space": exploration.space.model_dump(mode="json", by_alias=True),
        "shard": None if exploration.shard is None else "{}/{}".format(*exploration.shard),
        "complete": stopped is None,
        "stopped": stopped,
        "unhurt": None if baseline is None else {"outcome": baseline.outcome,
                                                 "failed": list(baseline.failed)},
        "boundaries": [b.to_dict() for b in exploration.found],
        "faults": [v.do for v in exploration.variants],
        "counts": _counts(measured.values()),
        "points": points,
        "failures": [_finding(exploration, f) for f in exploration.findings],
        "runs": runs,
    }


def _counts(runs: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for run in runs:
        kind = "fail" if run.failing else run.outcome
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def _finding(exploration: Exploration, finding: Finding) -> dict[str, Any]:
    return {"outcome": finding.outcome,
            "failed": finding.outcome.removeprefix("fail: ").split(" & "),
            "points": finding.points,
            "minimal": point_dict(exploration, finding.minimal),
            "confirmed": finding.confirmation, "flaky": finding.flaky,
            "profile": finding.profile}


def write(exploration: Exploration, stopped: str | None) -> dict[str, Any]:
    """explore.json, the minimal profiles and explore.html; returns explore.json's content."""
    from faultlab.explore.page import render_page

    write_minimal(exploration)
    data = summary(exploration, stopped)
    write_private(exploration.folder / RESULT, json.dumps(data, indent=2) + "\n")
    write_private(exploration.folder / PAGE, render_page(data))
    return data
