"""The suite's table, in the field study's style: per scenario, the runs, how they ended, and the
ranges of what was measured (from the first fault applied, the moment the path was hurt).

After scenario, runs and verdicts, the columns are registered (faultlab.report.registry): the Live
API's in faultlab.report.columns, a scenario's by its pack.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from faultlab.private import redact_text, remember_env_secrets, write_private
from faultlab.report.columns import columns

if TYPE_CHECKING:
    from faultlab.report.record import RunRecord

__all__ = ["headline", "legend", "render_suite", "scenarios", "table",
           "write_suite"]

LEGEND = ("Times are seconds from the first fault applied: detected (client.lost), resumed "
          "(resume.ok), recovered (the model's first output after the loss, client.recovered). "
          "Resumes refused: refused/attempts (close codes). Audio ratio: uplink audio seconds over "
          "wall seconds of the session.")


def scenarios(results: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    """Each scenario's runs, scenarios in the order first seen."""
    by_profile: dict[str, list[RunRecord]] = {}
    for result in results:
        by_profile.setdefault(result.profile, []).append(result)
    return by_profile


def table(results: Sequence[RunRecord]) -> tuple[list[str], list[list[str]]]:
    """The table's headings and its rows, one per scenario (`scenarios`' order): each column's
    cells (taken per run, in its result.json) combined over the scenario's runs."""
    registered = columns()
    headings = ["scenario", "runs", "verdicts", *(c.heading for c in registered)]
    rows = [[name, str(len(runs)), f"{sum(1 for r in runs if r.verdict == 'PASS')}/{len(runs)} PASS",
             *(c.combine([r.cells.get(c.heading) for r in runs]) for c in registered)]
            for name, runs in scenarios(results).items()]
    return headings, rows


def headline(results: Sequence[RunRecord]) -> str:
    passed = sum(1 for r in results if r.verdict == "PASS")
    return f"faultlab suite: {passed} of {len(results)} runs passed"


def legend() -> str:
    """What the columns mean: the core's and the packs' notes."""
    return " ".join([LEGEND, *(c.note for c in columns() if c.note)])


def render_suite(results: Sequence[RunRecord]) -> str:
    """The table of runs, wherever they ran: one row per scenario, in the order first seen."""
    headings, rows = table(results)
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(headings)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([
        f"# {headline(results)}", "", legend(), "",
        line(headings), line(["-" * w for w in widths]), *(line(r) for r in rows), "",
    ])


def write_suite(results: Sequence[RunRecord], path: Path) -> str:
    remember_env_secrets()
    text = redact_text(render_suite(results))
    write_private(path, text)
    return text
