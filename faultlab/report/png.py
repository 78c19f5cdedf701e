"""timeline.png: a run's sequence view (`faultlab.report.sequence`) drawn still, for a PR comment
or a chat, where report.html cannot go: time left to right on the run clock, a row per lane, the
faults as bands over every lane, each message an arrow from its sender's lane to its receiver's,
repeats as translucent spans, what each side noticed as marks on its lane, and the moments the
expectations were judged on.

Drawn on a Pillow canvas (`faultlab.report.canvas`). matplotlib drew it before: ~0.45 s of CPU to
import and as much to draw a silent-loss run, about half of a lone run's own CPU; Pillow takes
~0.1 s for both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from faultlab.private import write_private
from faultlab.report.canvas import PT, Canvas, Point, darker, mix, text_px
from faultlab.report.sequence import Item, View

WIDTH_PX, HEIGHT_PX = 1600, 600  # lengths in pixels; type sizes and mark areas in points
# The frame around the lanes, in pixels: lane names on the left; the title above; the time axis
# and the legend below.
MARGIN_PX = {"left": 78, "right": 16, "top": 64, "bottom": 74}
FONT_PT = 7.5
LABEL_GAP_PX = 14  # closer, two labels in a row read as one
TOP = -0.8  # lanes are 1 apart from 0, top down; above the first lane's labels, the faults' names
LABEL_ROWS = 3  # per lane, above its line; a label with no room in any is left off

FAULT_COLOUR = "#F9DCD2"  # a band; opaque, so a PNG's reader (or a test) can find it
FAULT_EDGE = "#D9826A"  # a fault that took no time (a close, an abort) is a line of this
FAULT_TEXT = "#A0402A"
LANE_COLOUR = "#B8B8B8"
GRID_COLOUR = "#EBEBEB"
MUTED = "#555555"
UNPALETTED = "#888888"  # a category the palette has no colour for
VERDICT_COLOURS = {"PASS": "#009E73", "FAIL": "#C00000"}
ERROR_COLOUR = "#E69F00"
HELD_COLOURS = {True: "#009E73", False: "#C00000"}

# How each kind of mark is drawn: its shape and area (points^2).
MARKS: dict[str, tuple[str, float]] = {
    "loss": ("X", 70), "refused": ("D", 34), "recovered": ("o", 46), "attempt": (">", 30),
    "conversation": ("s", 30), "tcp": ("|", 70), "process": ("s", 26), "note": (".", 40),
}
DEFAULT_MARK = ("o", 26)
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
    """Where the run clock and the lanes fall in the picture, in pixels: the lanes' area starts
    at (`left`, `top`), time from `start`, lane values from TOP."""

    start: float
    px_per_s: float
    width_px: float
    px_per_lane: float
    left: float = MARGIN_PX["left"]
    top: float = MARGIN_PX["top"]

    def x(self, t: float) -> float:
        """From the lanes' left edge."""
        return (t - self.start) * self.px_per_s

    def at(self, t: float, lane: float) -> Point:
        """A moment on a lane (or between lanes), in the picture."""
        return self.left + self.x(t), self.top + (lane - TOP) * self.px_per_lane

    def fit(self, t: float, width_px: float) -> tuple[float, str]:
        """Where a label of this width starts at `t`, and its alignment: ending at `t` when it
        would run off the right edge."""
        x = self.x(t)
        return (x - width_px, "right") if x + width_px > self.width_px else (x, "left")


def write_timeline_png(view: View, path: Path) -> None:
    """Draw `view` as a PNG of `WIDTH_PX` x `HEIGHT_PX`, readable only by its owner."""
    write_private(path, timeline_png(view))


def timeline_png(view: View) -> bytes:
    """The PNG's bytes."""
    canvas = Canvas(WIDTH_PX, HEIGHT_PX)
    _draw(canvas, view)
    return canvas.png()


def _draw(canvas: Canvas, view: View) -> None:
    m = MARGIN_PX
    lanes: dict[str, float] = {lane.id: float(y) for y, lane in enumerate(view.lanes)}
    start = min([0.0, *(b.t for b in view.bands)])
    end = max([view.t_end, *(b.t_end for b in view.bands), *(i.t_end or i.t for i in view.items),
               start + 1.0])
    end += (end - start) * 0.01
    width_px = WIDTH_PX - m["left"] - m["right"]
    height_px = HEIGHT_PX - m["top"] - m["bottom"]
    # Lane 0 (the client) on top; room above it for the faults' names, below the last lane for
    # the judgements' marks.
    scale = _Scale(start, width_px / (end - start), width_px,
                   height_px / (len(lanes) - 0.45 - TOP))
    _frame(canvas, view, lanes, scale, end)
    _bands(canvas, view, scale)
    _judgements(canvas, view, len(lanes), scale)
    _messages(canvas, view.items, view.palette, lanes, scale)
    _marks(canvas, view.items, view.palette, lanes, scale)
    _labels(canvas, view.items, view.palette, lanes, scale)
    _heading(canvas, view)
    _legend(canvas, view)


def _ticks(start: float, end: float, most: int = 10) -> list[float]:
    """Round moments from `start` to `end`, at most about `most` of them: 1, 2, 2.5 or 5 times
    a power of ten apart."""
    raw = (end - start) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(k * power for k in (1, 2, 2.5, 5, 10) if k * power >= raw)
    first = math.ceil(start / step) * step
    return [first + i * step for i in range(int((end - first) / step + 1e-9) + 1)]


def _frame(canvas: Canvas, view: View, lanes: dict[str, float], scale: _Scale,
           end: float) -> None:
    left, top = scale.left, scale.top
    right, bottom = left + scale.width_px, HEIGHT_PX - MARGIN_PX["bottom"]
    tick_pt = 3.5
    for t in _ticks(scale.start, end):
        x, _ = scale.at(t, 0)
        canvas.line([(x, top), (x, bottom)], GRID_COLOUR, 0.6)
        canvas.line([(x, bottom), (x, bottom + tick_pt * PT)], "black", 0.8)
        canvas.text((x, bottom + 2 * tick_pt * PT), f"{round(t, 6):g}", FONT_PT, "black", "mt")
    canvas.line([(left, bottom), (right, bottom)], "black", 0.6)
    canvas.text((left + scale.width_px / 2, bottom + 2 * tick_pt * PT + FONT_PT * PT * 1.2 + 3 * PT),
                "seconds on the run clock", 8, "black", "mt")
    for lane, y in zip(view.lanes, lanes.values(), strict=True):
        _, at = scale.at(0, y)
        canvas.line([(left, at), (right, at)], LANE_COLOUR, 0.8)
        canvas.text((left - 8 * PT, at), lane.label, 9, "black", "rm")


def _bands(canvas: Canvas, view: View, scale: _Scale) -> None:
    shelves = _Shelves(rows=2)
    bottom = HEIGHT_PX - MARGIN_PX["bottom"]
    for band in sorted(view.bands, key=lambda b: b.t):
        x0, top = scale.at(band.t, TOP)
        if band.instant or (band.t_end - band.t) * scale.px_per_s < 2:
            canvas.line([(x0, top), (x0, bottom)], FAULT_EDGE, 1.6)
        else:
            canvas.box(x0, top, scale.at(band.t_end, TOP)[0], bottom, FAULT_COLOUR)
        text = f" {band.label}" + ("" if band.reverted else " (not reverted)") + " "
        width = text_px(text, FONT_PT + 0.5, bold=True)
        x, align = scale.fit(band.t, width)
        row = shelves.place(x, width)
        if row is not None:
            canvas.text((x0, top + 0.03 * scale.px_per_lane + row * 14), text, FONT_PT + 0.5,
                        FAULT_TEXT, "lt" if align == "left" else "rt", bold=True)


def _judgements(canvas: Canvas, view: View, lane_count: int, scale: _Scale) -> None:
    bottom = HEIGHT_PX - MARGIN_PX["bottom"]
    for judgement in view.judgements:
        if judgement.at is None:
            continue
        colour = HELD_COLOURS[judgement.held]
        x, top = scale.at(judgement.at, TOP)
        canvas.dashed((x, top), (x, bottom), mix(colour, 0.8), 1)
        canvas.text(scale.at(judgement.at, lane_count - 0.5), "✓" if judgement.held else "✗",
                    11, colour, "md", bold=True)


def _messages(canvas: Canvas, items: Sequence[Item], palette: dict[str, str],
              lanes: dict[str, float], scale: _Scale) -> None:
    """Single messages as arrows between their lanes, repeats as translucent spans between the
    same lanes."""
    arrows: list[tuple[Item, float, float, str]] = []
    with canvas.translucent() as layer:
        for item in items:
            if item.to is None or item.lane not in lanes or item.to not in lanes:
                continue
            y0, y1 = lanes[item.lane], lanes[item.to]
            colour = palette.get(item.category, UNPALETTED)
            if item.t_end is not None and item.count > 1:
                # Spans of a second or two are a few pixels wide on a long run: an edge keeps
                # them seen.
                layer.box(*scale.at(item.t, min(y0, y1)), *scale.at(item.t_end, max(y0, y1)),
                          colour, 0.3)
            else:
                arrows.append((item, y0, y1, colour))
    for item, y0, y1, colour in arrows:
        down = y1 > y0
        canvas.line([scale.at(item.t, y0), scale.at(item.t, y1 - (0.05 if down else -0.05))],
                    colour, 0.9)
        canvas.mark("v" if down else "^", scale.at(item.t, y1 - (0.04 if down else -0.04)), 18,
                    colour, edge=False)


def _marks(canvas: Canvas, items: Sequence[Item], palette: dict[str, str],
           lanes: dict[str, float], scale: _Scale) -> None:
    """What a side noticed, on its lane: a mark, or a bar over a run of alike ones."""
    marks = [item for item in items if item.to is None and item.lane in lanes]
    with canvas.translucent() as layer:
        for item in marks:
            if item.t_end is not None and item.count > 1:
                y = lanes[item.lane]
                layer.box(*scale.at(item.t, y - 0.07), *scale.at(item.t_end, y + 0.07),
                          palette.get(item.category, UNPALETTED), 0.35)
    for item in marks:
        shape, area = MARKS.get(item.category, DEFAULT_MARK)
        canvas.mark(shape, scale.at(item.t, lanes[item.lane]), area,
                    palette.get(item.category, UNPALETTED))


def _label_of(item: Item) -> str | None:
    """An item's text in the picture, if it gets one: runs say how many and how much audio;
    the named categories say what they are."""
    if item.t_end is not None and item.count > 1:
        audio = f", {item.audio_s:.1f} s audio" if item.audio_s else ""
        return f"x{item.count}{audio}" if item.to is not None else item.label
    return item.label if item.category in LABEL_ORDER else None


def _labels(canvas: Canvas, items: Iterable[Item], palette: dict[str, str],
            lanes: dict[str, float], scale: _Scale) -> None:
    """Labels above their item's lane (a message's: its sender's), in the rows left free: what
    went wrong and came back first, then the conversation, then repeats; a label that repeats
    the last one of its lane close by is left off if routine (a long run's every utterance would
    say it). A white halo keeps a label read where an arrow or a fault's line crosses it."""
    shelves = {lane: _Shelves(rows=LABEL_ROWS) for lane in lanes}
    last: dict[tuple[str, str], float] = {}
    row_height = (FONT_PT + 4) / scale.px_per_lane
    labelled = [(item, text) for item in sorted(items, key=lambda i: i.t)
                if item.lane in lanes and (text := _label_of(item)) is not None]
    for item, text in sorted(labelled, key=lambda it: LABEL_ORDER.get(it[0].category, ROUTINE + 1)):
        width = text_px(text, FONT_PT)
        x, align = scale.fit(item.t, width)
        routine = LABEL_ORDER.get(item.category, ROUTINE) >= ROUTINE
        if routine and x - last.get((item.lane, text), float("-inf")) < REPEAT_PX:
            continue
        row = shelves[item.lane].place(x, width)
        if row is None:
            continue
        last[(item.lane, text)] = x
        canvas.text(scale.at(item.t, lanes[item.lane] - 0.1 - row * row_height), text, FONT_PT,
                    darker(palette.get(item.category, UNPALETTED)),
                    "ld" if align == "left" else "rd", halo=True)


def _heading(canvas: Canvas, view: View) -> None:
    top, left, right = 12, MARGIN_PX["left"], WIDTH_PX - MARGIN_PX["right"]
    canvas.text((left, top), view.title, 14, "black", "lt", bold=True)
    verdict = f" {view.verdict} "
    pad = 0.25 * 12 * PT
    width, height = text_px(verdict, 12, bold=True), 12 * PT
    canvas.rounded_box(right - width - 2 * pad, top - pad, right, top + height + pad, pad,
                       VERDICT_COLOURS.get(view.verdict, ERROR_COLOUR))
    canvas.text((right - pad, top), verdict, 12, "white", "rt", bold=True)
    held = sum(1 for j in view.judgements if j.held)
    facts = "  ·  ".join(f for f in [
        view.started.replace("T", " "), f"{view.t_end:.1f} s", f"{view.frames} messages",
        f"{held} of {len(view.judgements)} expectations held"] if f)
    canvas.text((left, top + 24), facts, 8.5, MUTED, "lt")
    failed = [f"✗ {j.expectation} (seen: {j.seen})" for j in view.judgements if not j.held]
    if view.error:
        failed.insert(0, f"error: {view.error}")
    if failed:
        more = f"  (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        canvas.text((left + text_px(facts, 8.5) + 18 * PT, top + 24),
                    _shorten(failed[0], 140) + more, 8.5, HELD_COLOURS[False], "lt")


def _shorten(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _legend(canvas: Canvas, view: View) -> None:
    """A row at the foot: each category of messages as an arrow's stem, each of marks as its
    mark (some share a colour, a turn's completion and a recovery, never a look), then the
    fault's band and the judgements' line."""
    size = FONT_PT + 0.5
    em = size * PT
    sent = {i.category for i in view.items if i.to is not None}
    marked = {i.category for i in view.items if i.to is None} - sent
    entries: list[tuple[str, str, str]] = [  # (how its handle looks, colour, name)
        ("|" if name in sent else MARKS.get(name, DEFAULT_MARK)[0], colour, name.replace("_", " "))
        for name, colour in view.palette.items() if name in sent | marked]
    if view.bands:
        entries.append(("band", FAULT_COLOUR, "fault"))
    if any(j.at is not None for j in view.judgements):
        entries.append(("dashes", MUTED, "judged"))
    if not entries:
        return
    handle, gap, spacing = 1.4 * em, 0.3 * em, 1.4 * em
    widths = [handle + gap + text_px(name, size) for _, _, name in entries]
    x = (WIDTH_PX - sum(widths) - spacing * (len(entries) - 1)) / 2
    y = HEIGHT_PX - 0.3 * em - 0.7 * em
    for (look, colour, name), width in zip(entries, widths, strict=True):
        middle = (x + handle / 2, y)
        if look == "band":
            canvas.box(x + 0.1 * em, y - 0.35 * em, x + handle - 0.1 * em, y + 0.35 * em, colour,
                       FAULT_EDGE)
        elif look == "dashes":
            canvas.dashed((x, y), (x + handle, y), colour, 1)
        elif look == "|":
            canvas.line([(middle[0], y - 4.5 * PT), (middle[0], y + 4.5 * PT)], colour, 1.6)
        else:
            canvas.mark(look, middle, 36, colour)
        canvas.text((x + handle + gap, y), name, size, "black", "lm")
        x += width + spacing
