"""A still picture drawn with Pillow the way a plotting library would: coordinates in the final
picture's pixels, lengths (line widths, marker areas, type sizes) in points as a page gives them,
everything drawn SUPER times larger and reduced at the end, which smooths every edge. Text is
DejaVu Sans, the font matplotlib ships (found without importing matplotlib).

Pillow is imported when a canvas is made, not with this module: a run that draws no picture
does not pay for it.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image, ImageDraw, ImageFont

DPI = 100
PT = DPI / 72  # pixels per point
SUPER = 2  # drawn this many times larger, then reduced
DASH_PT = (4.0, 3.0)  # a dashed line: on, off
LINE_MARKS = "|."  # drawn in their colour alone: a white edge would hide them

type RGB = tuple[int, int, int]
type Point = tuple[float, float]


@functools.cache
def font(size_pt: float, bold: bool = False) -> ImageFont.FreeTypeFont:
    """DejaVu Sans at `size_pt`, as drawn (SUPER times larger); Pillow's own font if matplotlib's
    copy is missing."""
    from PIL import ImageFont

    size_px = round(size_pt * PT * SUPER)
    spec = importlib.util.find_spec("matplotlib")  # finds the package without importing it
    if spec is not None and spec.submodule_search_locations:
        ttf = (Path(next(iter(spec.submodule_search_locations))) / "mpl-data" / "fonts" / "ttf"
               / f"DejaVuSans{'-Bold' if bold else ''}.ttf")
        if ttf.is_file():
            return ImageFont.truetype(str(ttf), size_px)
    return ImageFont.load_default(size_px)  # type: ignore[return-value]


def text_px(text: str, size_pt: float, bold: bool = False) -> float:
    """How wide `text` is in the final picture's pixels."""
    return font(size_pt, bold).getlength(text) / SUPER


def rgb(colour: str) -> RGB:
    value = int(colour.lstrip("#"), 16)
    return value >> 16, (value >> 8) & 0xFF, value & 0xFF


def mix(colour: str, alpha: float, under: RGB = (255, 255, 255)) -> RGB:
    """`colour` at `alpha` over `under`."""
    return tuple(round(c * alpha + u * (1 - alpha))  # type: ignore[return-value]
                 for c, u in zip(rgb(colour), under, strict=True))


def darker(colour: str) -> RGB:
    """A colour darkened enough for text on white (a palette's light blue is not)."""
    return mix(colour, 0.75, (0, 0, 0))


class Canvas:
    """A white picture of `width_px` x `height_px`, drawn SUPER times larger."""

    def __init__(self, width_px: int, height_px: int) -> None:
        from PIL import Image, ImageDraw

        self.image: Image.Image = Image.new("RGBA", (width_px * SUPER, height_px * SUPER),
                                            "white")
        self.draw: ImageDraw.ImageDraw = ImageDraw.Draw(self.image)

    def png(self) -> bytes:
        """The picture at its final size as a PNG of 256 colours (flat colours and text lose
        nothing seen, and a third of the size). Pillow's fast octree quantizer and its default
        compression: 10 ms for a run's timeline where median cut and `optimize` took 55 ms,
        and the file 6 % larger."""
        from PIL import Image

        image = self.image.convert("RGB").reduce(SUPER)
        out = io.BytesIO()
        image.quantize(256, method=Image.Quantize.FASTOCTREE).save(out, format="png")
        return out.getvalue()

    @staticmethod
    def _px(points: Iterable[Point]) -> list[Point]:
        return [(x * SUPER, y * SUPER) for x, y in points]

    def line(self, points: Iterable[Point], colour: str | RGB, width_pt: float) -> None:
        self.draw.line(self._px(points), fill=colour, width=max(1, round(width_pt * PT * SUPER)))

    def dashed(self, a: Point, b: Point, colour: str | RGB, width_pt: float) -> None:
        """A straight line of DASH_PT dashes from `a` to `b`."""
        on, off = (d * PT for d in DASH_PT)
        length = math.dist(a, b)
        step = 0.0
        while step < length:
            end = min(step + on, length)
            self.line([(a[0] + (b[0] - a[0]) * step / length, a[1] + (b[1] - a[1]) * step / length),
                       (a[0] + (b[0] - a[0]) * end / length, a[1] + (b[1] - a[1]) * end / length)],
                      colour, width_pt)
            step = end + off

    def box(self, x0: float, y0: float, x1: float, y1: float, fill: str | RGB,
            edge: str | RGB | None = None) -> None:
        self.draw.rectangle(self._px([(x0, y0), (max(x0, x1), max(y0, y1))]), fill=fill,
                            outline=edge, width=round(0.8 * PT * SUPER) if edge else 0)

    def rounded_box(self, x0: float, y0: float, x1: float, y1: float, radius: float,
                    fill: str | RGB) -> None:
        self.draw.rounded_rectangle(self._px([(x0, y0), (x1, y1)]), radius=round(radius * SUPER),
                                    fill=fill)

    def text(self, xy: Point, text: str, size_pt: float, colour: str | RGB, anchor: str,
             bold: bool = False, halo: bool = False) -> None:
        """`anchor`: Pillow's two letters, across (l, m, r) then up (t, m, d: the descender)."""
        self.draw.text((xy[0] * SUPER, xy[1] * SUPER), text, fill=colour, anchor=anchor,
                       font=font(size_pt, bold), stroke_width=round(0.9 * PT * SUPER) if halo
                       else 0, stroke_fill="white")

    def mark(self, shape: str, at: Point, area_pt2: float, colour: str | RGB,
             edge: bool = True) -> None:
        """A marker of `shape` (o s D X > v ^ | .) and area at `at`, edged white if filled."""
        r = math.sqrt(area_pt2) * PT / 2
        x, y = at
        outline = "white" if edge and shape not in LINE_MARKS else None
        width = round(0.5 * PT * SUPER)
        if shape == "|":
            self.line([(x, y - r), (x, y + r)], colour, 1.2)
        elif shape in "o.":
            r = r if shape == "o" else r / 2
            self.draw.ellipse(self._px([(x - r, y - r), (x + r, y + r)]), fill=colour,
                              outline=outline, width=width)
        else:
            self.draw.polygon(self._px(_outline(shape, x, y, r)), fill=colour, outline=outline,
                              width=width)

    def translucent(self) -> Layer:
        return Layer(self)


class Layer:
    """Shapes drawn over the picture at a share of their colour: `with canvas.translucent()`."""

    def __init__(self, canvas: Canvas) -> None:
        from PIL import Image, ImageDraw

        self.canvas = canvas
        self.image = Image.new("RGBA", canvas.image.size, (0, 0, 0, 0))
        self.draw = ImageDraw.Draw(self.image)

    def __enter__(self) -> Layer:
        return self

    def __exit__(self, *_: object) -> None:
        self.canvas.image.alpha_composite(self.image)

    def box(self, x0: float, y0: float, x1: float, y1: float, colour: str, alpha: float) -> None:
        fill = (*rgb(colour), round(alpha * 255))
        self.draw.rectangle([(x0 * SUPER, y0 * SUPER), (max(x0, x1) * SUPER, max(y0, y1) * SUPER)],
                            fill=fill, outline=fill, width=round(0.8 * PT * SUPER))


def _outline(shape: str, x: float, y: float, r: float) -> list[Point]:
    """A filled marker's corners: square, diamond, X, triangles right, down and up."""
    if shape == "s":
        return [(x - r, y - r), (x + r, y - r), (x + r, y + r), (x - r, y + r)]
    if shape == "D":
        r *= 1.2
        return [(x, y - r), (x + r, y), (x, y + r), (x - r, y)]
    if shape == "X":  # a plus, its arms `a` long and `w` wide each side, turned 45 degrees
        a, w, c = r * 1.2, r * 0.3, math.sqrt(0.5)
        plus = [(w, w), (w, a), (-w, a), (-w, w), (-a, w), (-a, -w), (-w, -w), (-w, -a),
                (w, -a), (w, -w), (a, -w), (a, w)]
        return [(x + (px - py) * c, y + (px + py) * c) for px, py in plus]
    d = {">": (1, 0), "v": (0, 1), "^": (0, -1)}[shape]
    tip = (x + d[0] * r, y + d[1] * r)
    back = [(x - d[0] * r + d[1] * r, y - d[1] * r - d[0] * r),
            (x - d[0] * r - d[1] * r, y - d[1] * r + d[0] * r)]
    return [tip, *back]
