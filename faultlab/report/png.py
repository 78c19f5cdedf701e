"""timeline.png: a run's sequence view (`faultlab.report.sequence`) drawn still, for a PR comment
or a chat, where report.html cannot go: time left to right on the run clock, a row per lane, the
faults as bands over every lane, each message an arrow from its sender's lane to its receiver's,
repeats as translucent spans, what each side noticed as marks on its lane, and the moments the
expectations were judged on.

matplotlib is imported when a picture is drawn, not with this module: the CLI starts without it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultlab.private import write_private
from faultlab.report.sequence import Item, View

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH_PX, HEIGHT_PX, DPI = 1600, 600, 100
# The frame around the lanes, in pixels: lane names on the left; the title above; the time axis
# and the legend below.
MARGIN_PX = {"left": 78, "right": 16, "top": 64, "bottom": 74}
FONT_PT = 7.5
# DejaVu Sans (matplotlib's own font) is about this wide per character, in ems: enough to tell
# whether two labels would overlap without laying the text out.
CHAR_EM = 0.58
LABEL_GAP_PX = 14  # closer, two labels in a row read as one
TOP = -0.8  # lanes are 1 apart from 0, top down; above the first lane's labels, the faults' names
LABEL_ROWS = 3  # per lane, above its line; a label with no room in any is left off

FAULT_COLOUR = "#F9DCD2"  # a band; opaque, so a PNG's reader (or a test) can find it
FAULT_EDGE = "#D9826A"  # a fault that took no time (a close, an abort) is a line of this
FAULT_TEXT = "#A0402A"
LANE_COLOUR = "#B8B8B8"
VERDICT_COLOURS = {"PASS": "#009E73", "FAIL": "#C00000"}
ERROR_COLOUR = "#E69F00"
HELD_COLOURS = {True: "#009E73", False: "#C00000"}

# How each kind of mark is drawn: matplotlib marker and area (points^2).
MARKS: dict[str, tuple[str, float]] = {
    "loss": ("X", 70), "refused": ("D", 34), "recovered": ("o", 46), "attempt": (">", 30),
    "conversation": ("s", 30), "tcp": ("|", 70), "process": ("s", 26), "note": (".", 40),
}
DEFAULT_MARK = ("o", 26)
# An event's name says who saw it; on that side's lane, the lane says it.
# The categories whose marks and messages are named in the picture, and which take the room
# first (lowest first): what a reader looks for. Runs of repeats come after them; other marks
# have no text (the legend says what their colour is).
LABEL_ORDER = {"loss": 0, "refused": 0, "recovered": 0, "close": 1, "conversation": 2}
ROUTINE = 2  # labels from here on are left off when they repeat the last of their lane nearby
REPEAT_PX = 240


@dataclass
class _Shelves:
    """Rows of labels in one strip of the picture: a label takes the first row where it overlaps
    none placed before it, or none (it is left off, not piled on another)."""

    rows: int
    taken: list[list[tuple[float, float]]] = field(init=False)

    def __post_init__(self) -> None:
        self.taken = [[] for _ in range(self.rows)]

    def place(self, x_px: float, width_px: float) -> int | None:
        start, end = x_px - LABEL_GAP_PX, x_px + width_px + LABEL_GAP_PX
        for row, spans in enumerate(self.taken):
            if all(end <= a or start >= b for a, b in spans):
                spans.append((x_px, x_px + width_px))
                return row
        return None


@dataclass(frozen=True)
class _Scale:
    """Where the run clock and the lanes fall in the picture, in pixels."""

    start: float
    px_per_s: float
    width_px: float
    px_per_lane: float

    def x(self, t: float) -> float:
        return (t - self.start) * self.px_per_s

    def fit(self, t: float, width_px: float) -> tuple[float, str]:
        """Where a label of this width starts at `t`, and its alignment: ending at `t` when it
        would run off the right edge."""
        x = self.x(t)
        return (x - width_px, "right") if x + width_px > self.width_px else (x, "left")


def _text_px(text: str, size_pt: float = FONT_PT) -> float:
    return len(text) * CHAR_EM * size_pt * DPI / 72


def write_timeline_png(view: View, path: Path) -> None:
    """Draw `view` as a PNG of `WIDTH_PX` x `HEIGHT_PX`, readable only by its owner."""
    write_private(path, timeline_png(view))


def timeline_png(view: View) -> bytes:
    """The PNG's bytes: drawn, then reduced to 256 colours (a picture of flat colours and text
    loses nothing seen, and a third of its size: 49 KB instead of 148 KB for a 15-minute run)."""
    import matplotlib
    from PIL import Image

    pixels = io.BytesIO()
    # A model's answer ("$5 and $10") is text, not TeX: mathtext would garble it or fail.
    with matplotlib.rc_context({"font.size": FONT_PT, "axes.linewidth": 0.6,
                                "text.parse_math": False}):
        _figure(view).savefig(pixels, format="raw", dpi=DPI)
    image = Image.frombytes("RGBA", (WIDTH_PX, HEIGHT_PX), pixels.getvalue())
    out = io.BytesIO()
    image.convert("RGB").quantize(256).save(out, format="png", optimize=True)
    return out.getvalue()


def _figure(view: View) -> Figure:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, facecolor="white")
    m = MARGIN_PX
    axes = figure.add_axes((m["left"] / WIDTH_PX, m["bottom"] / HEIGHT_PX,
                            1 - (m["left"] + m["right"]) / WIDTH_PX,
                            1 - (m["top"] + m["bottom"]) / HEIGHT_PX))
    lanes: dict[str, float] = {lane.id: float(y) for y, lane in enumerate(view.lanes)}
    start = min([0.0, *(b.t for b in view.bands)])
    end = max([view.t_end, *(b.t_end for b in view.bands), *(i.t_end or i.t for i in view.items),
               start + 1.0])
    end += (end - start) * 0.01
    axes.set_xlim(start, end)
    # Lane 0 (the client) on top; room above it for the faults' names, below the last lane for
    # the judgements' marks.
    axes.set_ylim(len(lanes) - 0.45, TOP)
    width_px = WIDTH_PX * axes.get_position().width
    scale = _Scale(start, width_px / (end - start), width_px,
                   HEIGHT_PX * axes.get_position().height / (len(lanes) - 0.45 - TOP))

    _frame(axes, view, lanes)
    _bands(axes, view, scale)
    _judgements(axes, view, len(lanes))
    _messages(axes, view.items, view.palette, lanes)
    _marks(axes, view.items, view.palette, lanes)
    _labels(axes, view.items, view.palette, lanes, scale)
    _heading(figure, view)
    _legend(figure, view)
    return figure


def _frame(axes: Axes, view: View, lanes: dict[str, float]) -> None:
    axes.set_yticks(list(lanes.values()), [lane.label for lane in view.lanes], fontsize=9)
    axes.tick_params(axis="y", length=0, pad=8)
    axes.hlines(list(lanes.values()), *axes.get_xlim(), colors=LANE_COLOUR, linewidths=0.8,
                zorder=1)
    axes.grid(axis="x", color="#EBEBEB", linewidth=0.6, zorder=0.5)
    axes.set_axisbelow(True)
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    axes.set_xlabel("seconds on the run clock", fontsize=8, labelpad=3)


def _bands(axes: Axes, view: View, scale: _Scale) -> None:
    shelves = _Shelves(rows=2)
    for band in sorted(view.bands, key=lambda b: b.t):
        if band.instant or (band.t_end - band.t) * scale.px_per_s < 2:
            axes.axvline(band.t, color=FAULT_EDGE, linewidth=1.6, zorder=0.8)
        else:
            axes.axvspan(band.t, band.t_end, facecolor=FAULT_COLOUR, edgecolor="none", zorder=0.6)
        text = f" {band.label}" + ("" if band.reverted else " (not reverted)") + " "
        width = _text_px(text, FONT_PT + 0.5)
        x, align = scale.fit(band.t, width)
        row = shelves.place(x, width)
        if row is not None:
            axes.text(band.t, TOP + 0.03 + row * 14 / scale.px_per_lane, text, color=FAULT_TEXT,
                      fontsize=FONT_PT + 0.5, fontweight="bold", va="top", ha=align, zorder=6,
                      clip_on=True)


def _judgements(axes: Axes, view: View, lane_count: int) -> None:
    for judgement in view.judgements:
        if judgement.at is None:
            continue
        colour = HELD_COLOURS[judgement.held]
        axes.axvline(judgement.at, color=colour, linestyle=(0, (4, 3)), linewidth=1,
                     alpha=0.8, zorder=1.5)
        axes.text(judgement.at, lane_count - 0.5, "✓" if judgement.held else "✗",
                  color=colour, fontsize=11, fontweight="bold", ha="center", va="bottom",
                  zorder=6)


def _messages(axes: Axes, items: Sequence[Item], palette: dict[str, str],
              lanes: dict[str, float]) -> None:
    """Single messages as arrows between their lanes (one collection for them all: a long run
    has hundreds), repeats as translucent spans between the same lanes."""
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.patches import Rectangle

    lines: list[list[tuple[float, float]]] = []
    line_colours: list[str] = []
    heads: dict[str, tuple[list[float], list[float], list[str]]] = {"v": ([], [], []),
                                                                     "^": ([], [], [])}
    spans: list[Rectangle] = []
    span_colours: list[str] = []
    for item in items:
        if item.to is None or item.lane not in lanes or item.to not in lanes:
            continue
        y0, y1 = lanes[item.lane], lanes[item.to]
        colour = palette.get(item.category, "#888888")
        if item.t_end is not None and item.count > 1:
            spans.append(Rectangle((item.t, min(y0, y1)), item.t_end - item.t, abs(y1 - y0)))
            span_colours.append(colour)
            continue
        down = y1 > y0
        lines.append([(item.t, y0), (item.t, y1 - (0.05 if down else -0.05))])
        line_colours.append(colour)
        xs, ys, colours = heads["v" if down else "^"]
        xs.append(item.t)
        ys.append(y1 - (0.04 if down else -0.04))
        colours.append(colour)
    if spans:
        # Spans of a second or two are a few pixels wide on a long run: an edge keeps them seen.
        axes.add_collection(PatchCollection(spans, facecolors=span_colours, edgecolors=span_colours,
                                            alpha=0.3, linewidths=0.8, zorder=2))
    if lines:
        axes.add_collection(LineCollection(lines, colors=line_colours, linewidths=0.9, zorder=3))
    for marker, (xs, ys, colours) in heads.items():
        if xs:
            axes.scatter(xs, ys, s=18, c=colours, marker=marker, linewidths=0, zorder=3)


def _marks(axes: Axes, items: Sequence[Item], palette: dict[str, str],
           lanes: dict[str, float]) -> None:
    """What a side noticed, on its lane: a mark, or a bar over a run of alike ones."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    groups: dict[tuple[str, float], tuple[list[float], list[float], list[str]]] = {}
    bars: list[Rectangle] = []
    bar_colours: list[str] = []
    for item in items:
        if item.to is not None or item.lane not in lanes:
            continue
        colour = palette.get(item.category, "#888888")
        y = lanes[item.lane]
        if item.t_end is not None and item.count > 1:
            bars.append(Rectangle((item.t, y - 0.07), item.t_end - item.t, 0.14))
            bar_colours.append(colour)
        xs, ys, colours = groups.setdefault(MARKS.get(item.category, DEFAULT_MARK), ([], [], []))
        xs.append(item.t)
        ys.append(y)
        colours.append(colour)
    if bars:
        axes.add_collection(PatchCollection(bars, facecolors=bar_colours, edgecolors=bar_colours,
                                            alpha=0.35, linewidths=0.8, zorder=2))
    for (marker, size), (xs, ys, colours) in groups.items():
        filled = marker not in "|.x"  # a line mark is its edge: white would hide it
        axes.scatter(xs, ys, s=size, c=colours, marker=marker, zorder=4,
                     edgecolors="white" if filled else None, linewidths=0.5 if filled else None)


def _label_of(item: Item) -> str | None:
    """An item's text in the picture, if it gets one: runs say how many and how much audio;
    the named categories say what they are."""
    if item.t_end is not None and item.count > 1:
        audio = f", {item.audio_s:.1f} s audio" if item.audio_s else ""
        return f"x{item.count}{audio}" if item.to is not None else item.label
    return item.label if item.category in LABEL_ORDER else None


def _labels(axes: Axes, items: Iterable[Item], palette: dict[str, str],
            lanes: dict[str, float], scale: _Scale) -> None:
    """Labels above their item's lane (a message's: its sender's), in the rows left free: what
    went wrong and came back first, then the conversation, then repeats; a label that repeats
    the last one of its lane close by is left off if routine (a long run's every utterance would
    say it)."""
    from matplotlib.patheffects import withStroke

    # A white edge keeps a label read where an arrow or a fault's line crosses it.
    halo = [withStroke(linewidth=1.8, foreground="white")]
    shelves = {lane: _Shelves(rows=LABEL_ROWS) for lane in lanes}
    last: dict[tuple[str, str], float] = {}
    row_height = (FONT_PT + 4) / scale.px_per_lane
    labelled = [(item, text) for item in sorted(items, key=lambda i: i.t)
                if item.lane in lanes and (text := _label_of(item)) is not None]
    for item, text in sorted(labelled, key=lambda it: LABEL_ORDER.get(it[0].category, ROUTINE + 1)):
        width = _text_px(text)
        x, align = scale.fit(item.t, width)
        routine = LABEL_ORDER.get(item.category, ROUTINE) >= ROUTINE
        if routine and x - last.get((item.lane, text), float("-inf")) < REPEAT_PX:
            continue
        row = shelves[item.lane].place(x, width)
        if row is None:
            continue
        last[(item.lane, text)] = x
        axes.text(item.t, lanes[item.lane] - 0.1 - row * row_height, text, fontsize=FONT_PT,
                  color=_darker(palette.get(item.category, "#888888")), ha=align,
                  va="bottom", zorder=5, clip_on=True, path_effects=halo)


def _darker(colour: str) -> str:
    """A colour darkened enough for text on white (the palette's light blue is not)."""
    from matplotlib.colors import to_hex, to_rgb

    r, g, b = to_rgb(colour)
    return to_hex((r * 0.75, g * 0.75, b * 0.75))


def _heading(figure: Figure, view: View) -> None:
    from matplotlib.text import Annotation

    top = 1 - 12 / HEIGHT_PX
    left = MARGIN_PX["left"] / WIDTH_PX
    figure.text(left, top, view.title, fontsize=14, fontweight="bold", va="top", ha="left")
    colour = VERDICT_COLOURS.get(view.verdict, ERROR_COLOUR)
    figure.text(1 - MARGIN_PX["right"] / WIDTH_PX, top, f" {view.verdict} ", fontsize=12,
                fontweight="bold", color="white", va="top", ha="right",
                bbox={"boxstyle": "round,pad=0.25", "facecolor": colour, "edgecolor": "none"})
    held = sum(1 for j in view.judgements if j.held)
    facts = "  ·  ".join(f for f in [
        view.started.replace("T", " "), f"{view.t_end:.1f} s", f"{view.frames} messages",
        f"{held} of {len(view.judgements)} expectations held"] if f)
    said = figure.text(left, top - 24 / HEIGHT_PX, facts, fontsize=8.5, va="top", ha="left",
                       color="#555555")
    failed = [f"✗ {j.expectation} (seen: {j.seen})" for j in view.judgements if not j.held]
    if view.error:
        failed.insert(0, f"error: {view.error}")
    if failed:
        # After the facts, wherever their text ends once drawn.
        more = f"  (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        figure.add_artist(Annotation(
            _shorten(failed[0], 140) + more, xy=(1, 1), xycoords=said, xytext=(18, 0),
            textcoords="offset points", fontsize=8.5, va="top", ha="left",
            color=HELD_COLOURS[False]))


def _shorten(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _legend(figure: Figure, view: View) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    # A category of messages shows as an arrow's stem, one of marks as its mark: some share a
    # colour (a turn's completion and a recovery), never a look.
    sent = {i.category for i in view.items if i.to is not None}
    marked = {i.category for i in view.items if i.to is None} - sent
    handles: list[Any] = [
        Line2D([], [], color=colour, linestyle="none", label=name.replace("_", " "),
               marker="|" if name in sent else MARKS.get(name, DEFAULT_MARK)[0],
               markersize=9 if name in sent else 6, markeredgewidth=1.6 if name in sent else 0.5,
               markeredgecolor=colour if name in sent or name == "tcp" else "white")
        for name, colour in view.palette.items() if name in sent | marked]
    if view.bands:
        handles.append(Patch(facecolor=FAULT_COLOUR, edgecolor=FAULT_EDGE, label="fault"))
    if any(j.at is not None for j in view.judgements):
        handles.append(Line2D([], [], color="#555555", linestyle=(0, (2, 1.5)), label="judged"))
    if handles:
        figure.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False,
                      fontsize=FONT_PT + 0.5, bbox_to_anchor=(0.5, 0.0), borderaxespad=0.3,
                      handletextpad=0.3, columnspacing=1.4, handlelength=1.4)
