"""suite-TIME.html: the suite's table as a page beside its markdown (suite-TIME.md), each run's
verdict a link to its report.html, over a chart of the times the table gives as ranges (the
columns combined by `registry.span`: detected, resumed, recovered) against the field study's
range for each scenario, so that a regression is a dot outside its band.

The page needs nothing but itself: styles inlined, the chart inline SVG drawn by matplotlib
(imported when a page is drawn, not with this module).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from faultlab.private import redact_text, remember_env_secrets, write_private
from faultlab.report.columns import columns
from faultlab.report.html import render
from faultlab.report.record import PAGE_FILE
from faultlab.report.registry import span
from faultlab.report.sequence import PALETTE
from faultlab.report.suite import headline, legend, scenarios, table

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

    from faultlab.report.record import RunRecord

type Range = tuple[float, float]

OUTSIDE_COLOUR = "#C00000"
# The time columns' colours in the chart, from the reports' palette and none of them red (red is
# what falls outside); a pack's time column takes the next free one.
TIME_COLOURS = {"detected": PALETTE["setup"], "resumed": PALETTE["resumption"],
                "recovered": PALETTE["recovered"]}
SPARE_COLOURS = (PALETTE["tool_call"], PALETTE["conversation"], PALETTE["audio"],
                 PALETTE["process"])
CHART_WIDTH_IN = 10.0
CHART_FONT_PT = 9.0
# Text stays text in the SVG (the browser's sans-serif draws it), and ids are the same from one
# page to the next.
CHART_STYLE: dict[RcKeyType, Any] = {"svg.fonttype": "none", "svg.hashsalt": "faultlab",
                                     "font.size": CHART_FONT_PT, "axes.linewidth": 0.6,
                                     "text.parse_math": False}


@dataclass(frozen=True)
class RunLink:
    """One run's verdict in the table: a link to its report, and what its title says."""

    verdict: str
    href: str | None
    title: str
    outside: bool


@dataclass(frozen=True)
class Cell:
    """A column's cell of a scenario: the markdown table's text, and for a time column the field
    study's range and whether a run fell outside it."""

    text: str
    time: bool = False
    field: str = ""
    outside: bool = False
    title: str = ""


@dataclass(frozen=True)
class Row:
    scenario: str
    runs: int
    verdicts: str
    links: list[RunLink]
    cells: list[Cell]


def time_headings() -> list[str]:
    """The suite table's columns that are times, in seconds from the first fault."""
    return [c.heading for c in columns() if c.combine is span]


def seconds(record: RunRecord, heading: str) -> float | None:
    value = record.cells.get(heading)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def field_range(record: RunRecord, heading: str) -> Range | None:
    """The field study's range for a time column, as the run's profile stated it."""
    value = record.field_ranges.get(heading)
    if (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)):
        low, high = sorted(float(v) for v in value)
        return low, high
    return None


def scenario_range(runs: Sequence[RunRecord], heading: str) -> Range | None:
    """A scenario's field range for a column: its first run's that states one."""
    return next((r for run in runs if (r := field_range(run, heading)) is not None), None)


def outside(value: float, band: Range) -> bool:
    """Outside the band as the table shows times: to the hundredth of a second."""
    shown = round(value, 2)
    return shown < round(band[0], 2) or shown > round(band[1], 2)


def time_outside(record: RunRecord, heading: str) -> float | None:
    """The run's time for a column if it falls outside its field range."""
    value, band = seconds(record, heading), field_range(record, heading)
    return value if value is not None and band is not None and outside(value, band) else None


def _link(record: RunRecord, page: Path, headings: Sequence[str]) -> RunLink:
    href = None
    if record.run_dir:
        href = quote(os.path.relpath(Path(record.run_dir) / PAGE_FILE, page.parent))
    times = [f"{h} {v:.2f} s" for h in headings if (v := seconds(record, h)) is not None]
    off = [h for h in headings if time_outside(record, h) is not None]
    title = "; ".join([f"{Path(record.run_dir).name or record.profile}: {record.verdict}",
                       *([", ".join(times)] if times else []),
                       *([f"outside the field study's range: {', '.join(off)}"] if off else [])])
    return RunLink(record.verdict, href, title, bool(off))


def _time_cell(text: str, runs: Sequence[RunRecord], heading: str) -> Cell:
    band = scenario_range(runs, heading)
    off = [f"{v:.2f} s" for run in runs if (v := time_outside(run, heading)) is not None]
    field = "" if band is None else f"field {span(list(band))}"
    title = f"{', '.join(off)}: outside the field study's {span(list(band))}" if off and band else ""
    return Cell(text, True, field, bool(off), title)


def rows(records: Sequence[RunRecord], page: Path) -> list[Row]:
    """The table's rows, with each run's link and the field ranges."""
    _, cells = table(records)
    times = time_headings()
    registered = columns()
    return [Row(scenario=name, runs=len(runs), verdicts=row[2],
                links=[_link(r, page, times) for r in runs],
                cells=[_time_cell(text, runs, c.heading) if c.heading in times else Cell(text)
                       for c, text in zip(registered, row[3:], strict=True)])
            for (name, runs), row in zip(scenarios(records).items(), cells, strict=True)]


def render_suite_page(records: Sequence[RunRecord], page: Path) -> str:
    """The page of a suite's runs, to be written to `page` (its links are relative to it)."""
    headings = time_headings()
    groups = scenarios(records)
    charted = {name: runs for name, runs in groups.items()
               if any(seconds(r, h) is not None for r in runs for h in headings)}
    return render(
        "suite.html.j2", title=headline(records), legend=legend(),
        headings=[c.heading for c in columns()], time_headings=set(headings),
        rows=rows(records, page), chart=chart_svg(charted, headings) if charted else "",
        left_out=[name for name in groups if name not in charted],
        time_names=" or ".join([", ".join(headings[:-1]), *headings[-1:]] if headings[:-1]
                               else headings))


def write_suite_page(records: Sequence[RunRecord], path: Path) -> Path:
    """The page written to `path` (suite-TIME.html beside the table): private, and with every
    key the runs met redacted."""
    remember_env_secrets()
    write_private(path, redact_text(render_suite_page(records, path)))
    return path


def chart_svg(groups: dict[str, list[RunRecord]], headings: Sequence[str]) -> str:
    """Per scenario (a row) and time column (a line of it): each run's time as a dot, the runs'
    range as a bar, over the field study's range as a band; what falls outside its band is red.
    Inline SVG, without the XML header (a page holds it)."""
    import matplotlib

    with matplotlib.rc_context(CHART_STYLE):
        out = io.StringIO()
        _chart_figure(groups, headings).savefig(
            out, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return _inline(out.getvalue())


def _chart_figure(groups: dict[str, list[RunRecord]], headings: Sequence[str]) -> Figure:
    from matplotlib.figure import Figure

    used = [h for h in headings if any(seconds(r, h) is not None or field_range(r, h)
                                       for runs in groups.values() for r in runs)]
    colours = dict(TIME_COLOURS)
    spare = iter(c for c in SPARE_COLOURS if c not in colours.values())
    for h in used:
        colours.setdefault(h, next(spare, "#444444"))
    row_in = 0.2 * len(used) + 0.2
    top_in, bottom_in = 0.45, 0.5
    height_in = top_in + bottom_in + row_in * len(groups)
    # Room for the scenarios' names on the left and the columns' on the right, in DejaVu Sans
    # at about 0.6 em a character.
    left_in = min(3.2, 0.3 + max(len(n) for n in groups) * CHART_FONT_PT * 0.6 / 72)
    right_in = 0.2 + max(len(h) for h in used) * 7.5 * 0.6 / 72
    figure = Figure(figsize=(CHART_WIDTH_IN, height_in))
    axes = figure.add_axes((left_in / CHART_WIDTH_IN, bottom_in / height_in,
                            1 - (left_in + right_in) / CHART_WIDTH_IN,
                            1 - (top_in + bottom_in) / height_in))
    high = _draw_chart(axes, groups, used, colours)
    axes.set_xlim(0, high * 1.06 or 1.0)
    axes.set_ylim(len(groups) - 0.5, -0.5)
    axes.set_yticks(range(len(groups)), list(groups), fontsize=CHART_FONT_PT)
    axes.tick_params(axis="y", length=0, pad=6)
    axes.set_xlabel("seconds since the first fault")
    axes.grid(axis="x", color="#E4E4E4", linewidth=0.6)
    axes.set_axisbelow(True)
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    _chart_legend(figure)
    return figure


def _draw_chart(axes: Axes, groups: dict[str, list[RunRecord]], used: Sequence[str],
                colours: dict[str, str]) -> float:
    """The rows' bands, bars and dots; the highest time drawn."""
    from matplotlib.transforms import blended_transform_factory

    high = 0.0
    beside = blended_transform_factory(axes.transAxes, axes.transData)
    step = 1 / (len(used) + 1)
    for i, runs in enumerate(groups.values()):
        if i % 2:
            axes.axhspan(i - 0.5, i + 0.5, color="#F6F6F6", zorder=0, linewidth=0)
        for j, heading in enumerate(used):
            y = i - 0.5 + (j + 1) * step
            colour = colours[heading]
            axes.text(1.01, y, heading, transform=beside, color=colour, fontsize=7.5,
                      va="center", ha="left")
            band = scenario_range(runs, heading)
            if band is not None:
                width = max(band[1] - band[0], 0.01)
                axes.barh(y, width, left=band[0], height=step * 0.85, color=colour, alpha=0.22,
                          linewidth=0, zorder=1)
                high = max(high, band[1])
            values = [v for r in runs if (v := seconds(r, heading)) is not None]
            if not values:
                continue
            far = [v for r in runs if (v := time_outside(r, heading)) is not None]
            inside = [v for v in values if v not in far]
            low_v, high_v = min(values), max(values)
            high = max(high, high_v)
            axes.hlines(y, low_v, high_v, colors=colour, linewidth=2, zorder=2)
            if band is not None and far:  # the bar's stretches beyond the band, red over it
                for start, end in ((low_v, min(band[0], high_v)), (max(band[1], low_v), high_v)):
                    if end > start:
                        axes.hlines(y, start, end, colors=OUTSIDE_COLOUR, linewidth=2, zorder=2.5)
            if inside:
                axes.scatter(inside, [y] * len(inside), s=28, color=colour, edgecolors="white",
                             linewidths=0.6, zorder=3)
            if far:
                marks = axes.scatter(far, [y] * len(far), s=34, marker="D", color=OUTSIDE_COLOUR,
                                     edgecolors="white", linewidths=0.6, zorder=4)
                marks.set_gid(f"outside-{i}-{heading.replace(' ', '-')}")
    return high


def _chart_legend(figure: Figure) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([], [], color="#555555", marker="o", markersize=5, linewidth=2,
               markeredgecolor="white", label="runs (dots) and their range (bar)"),
        Patch(facecolor="#555555", alpha=0.22, label="field study's range"),
        Line2D([], [], color=OUTSIDE_COLOUR, marker="D", markersize=5, linewidth=2,
               markeredgecolor="white", label="outside the field study's range"),
    ]
    figure.legend(handles=handles, loc="upper left", ncol=3, frameon=False, fontsize=8,
                  bbox_to_anchor=(0.0, 1.0), borderaxespad=0.4, handlelength=1.8)


def _inline(svg: str) -> str:
    """matplotlib's SVG as a page holds it: from `<svg`, without the namespaces that HTML gives
    inline SVG anyway (they are URLs, and the page names none)."""
    svg = svg[svg.index("<svg"):]
    return re.sub(r'\s+xmlns(?::xlink)?="[^"]*"', "", svg, count=2)
