"""explore.html: the map of an exploration (for each fault and duration, a grid of the unhurt
session's messages by the offset after them, each point coloured by its outcome and linking to its
run's report.html), the distinct failures with their minimal profiles, and the two-step points."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from faultlab.report.html import render

# Outcomes other than a failure, as the map's cells name them.
PLAIN = {"pass": "pass", "error": "error", "unfired": "unfired"}


def _cell(point: dict[str, Any], failures: list[str], runs: dict[str, Any]) -> dict[str, Any]:
    outcome = point["outcome"]
    if outcome in PLAIN:
        css, mark = PLAIN[outcome], {"pass": "", "error": "!", "unfired": "-"}[outcome]
    else:
        css, mark = "fail", str(failures.index(outcome) + 1) if outcome in failures else "x"
    run = next(iter(runs.get(point["key"], [])), None)
    link = None if run is None else quote(f"{run['run_dir']}/report.html")
    return {"css": css, "mark": mark, "link": link,
            "title": f"{point['describe']}: {outcome}"}


def render_page(data: dict[str, Any]) -> str:
    failures = [f["outcome"] for f in data["failures"]]
    for point in data["points"]:  # a failure not shrunk (a shard's) still gets its number
        if point["outcome"].startswith("fail") and point["outcome"] not in failures:
            failures.append(point["outcome"])
    maps: dict[tuple[str, str], dict[tuple[int, float], dict[str, Any]]] = {}
    pairs = []
    for point in data["points"]:
        steps = point["steps"]
        if len(steps) != 1:
            pairs.append({"describe": point["describe"],
                          **_cell(point, failures, data["runs"])})
            continue
        step = steps[0]
        fault = ", ".join(f"{k}: {v}" for k, v in step["fault"].items())
        lasting = "to the end" if step["duration"] is None else f"for {step['duration']:g} s"
        maps.setdefault((fault, lasting), {})[(step["at"]["index"], step["after"])] = _cell(
            point, failures, data["runs"])
    boundaries = data["boundaries"]
    grids = []
    for (fault, lasting), cells in maps.items():
        afters = sorted({after for _, after in cells})
        rows = [{"label": _label(b), "cells": [cells.get((b["index"], a)) for a in afters]}
                for b in boundaries if any((b["index"], a) in cells for a in afters)]
        grids.append({"title": f"{fault}, {lasting}", "afters": [f"{a:g}" for a in afters],
                      "rows": rows})
    counts = ", ".join(f"{n} {kind}" for kind, n in data["counts"].items())
    return render("explore.html.j2", title=f"faultlab explore: {data['profile']}", data=data,
                  counts=counts, grids=grids, pairs=pairs,
                  failures=[{**f, "number": i + 1} for i, f in enumerate(data["failures"])],
                  stopped=data["stopped"])


def _label(boundary: dict[str, Any]) -> str:
    nth = f" #{boundary['nth']}" if boundary["nth"] > 1 else ""
    return f"{boundary['index'] + 1}. {boundary['from']} {boundary['kind']}{nth}"
