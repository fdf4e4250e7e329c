"""A tiny PNG line-chart writer: an RGB NumPy canvas, a 5x7 bitmap font, zlib + struct encoding.

No plotting library is needed (nor allowed) for the benchmark charts, so this draws what they
use: a title, a legend, axes with "nice" numeric ticks and grid lines, axis labels (the y label
rotated) and one polyline per series. Text is upper-cased and drawn with the font below.

    line_chart("docs/chart.png", {"a": [1, 3, 2], "b": [2, 2, 4]}, "Title", "x", "y")
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

Color = tuple[int, int, int]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)
GRID: Color = (226, 226, 226)
AXIS: Color = (60, 60, 60)
#: Series colours, in order (Tableau 10): distinct and readable on white.
PALETTE: tuple[Color, ...] = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
)

GLYPH_W, GLYPH_H = 5, 7
# Each glyph: 7 rows top to bottom, two hex digits per row, bit 4 = leftmost column.
_FONT_HEX = {
    "0": "0E11131519110E", "1": "040C040404040E", "2": "0E11010204081F", "3": "1F02040201110E",
    "4": "02060A121F0202", "5": "1F101E0101110E", "6": "0608101E11110E", "7": "1F010204080808",
    "8": "0E11110E11110E", "9": "0E11110F01020C",
    "A": "0E1111111F1111", "B": "1E11111E11111E", "C": "0E11101010110E", "D": "1C12111111121C",
    "E": "1F10101E10101F", "F": "1F10101E101010", "G": "0E11101711110F", "H": "1111111F111111",
    "I": "0E04040404040E", "J": "0702020202120C", "K": "11121418141211", "L": "1010101010101F",
    "M": "111B1515111111", "N": "11111915131111", "O": "0E11111111110E", "P": "1E11111E101010",
    "Q": "0E11111115120D", "R": "1E11111E141211", "S": "0F10100E01011E", "T": "1F040404040404",
    "U": "1111111111110E", "V": "11111111110A04", "W": "1111111515150A", "X": "11110A040A1111",
    "Y": "1111110A040404", "Z": "1F01020408101F",
    " ": "00000000000000", ".": "00000000000C0C", ",": "000000000C0408", "-": "0000001F000000",
    "+": "0004041F040400", "(": "02040808080402", ")": "08040202020408", ":": "000C0C000C0C00",
    "/": "00010204081000", "%": "18190204081303", "_": "0000000000001F", "=": "00001F001F0000",
    "'": "0C040800000000", "?": "0E110102040004", "!": "04040404000004", "#": "0A0A1F0A1F0A0A",
    "*": "0004150E150400", "<": "02040810080402", ">": "08040201020408", "[": "0E08080808080E",
    "]": "0E02020202020E",
}


def _glyph(hex_rows: str) -> np.ndarray:
    if len(hex_rows) != 2 * GLYPH_H:
        raise ValueError(f"glyph {hex_rows!r} is not {GLYPH_H} rows")
    rows = [int(hex_rows[i:i + 2], 16) for i in range(0, 2 * GLYPH_H, 2)]
    return np.array([[(r >> (GLYPH_W - 1 - c)) & 1 for c in range(GLYPH_W)] for r in rows], dtype=bool)


FONT: dict[str, np.ndarray] = {ch: _glyph(bits) for ch, bits in _FONT_HEX.items()}


# ---- PNG encoding ------------------------------------------------------------------------------
def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(canvas: np.ndarray) -> bytes:
    """PNG bytes of an RGB ``uint8`` canvas of shape (height, width, 3): 8-bit truecolour,
    one IDAT, filter type 0 (None) on every scanline."""
    if canvas.ndim != 3 or canvas.shape[2] != 3 or canvas.dtype != np.uint8:
        raise ValueError(f"expected a (height, width, 3) uint8 canvas, got {canvas.dtype} {canvas.shape}")
    height, width, _ = canvas.shape
    if height == 0 or width == 0:
        raise ValueError("a PNG needs at least one pixel")
    scanlines = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # column 0: the filter byte
    scanlines[:, 1:] = canvas.reshape(height, 3 * width)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # depth 8, RGB, no interlace
    return (PNG_SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 9)) + _chunk(b"IEND", b""))


def write_png(path: str | Path, canvas: np.ndarray) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_png(canvas))
    return path


# ---- drawing primitives ------------------------------------------------------------------------
def new_canvas(width: int, height: int, color: Color = WHITE) -> np.ndarray:
    canvas = np.empty((height, width, 3), dtype=np.uint8)
    canvas[:] = color
    return canvas


def fill_rect(canvas: np.ndarray, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
    """Fill the pixels x0 <= x < x1, y0 <= y < y1 (clipped to the canvas)."""
    h, w, _ = canvas.shape
    x0, x1 = max(0, min(x0, x1)), min(w, max(x0, x1))
    y0, y1 = max(0, min(y0, y1)), min(h, max(y0, y1))
    if x0 < x1 and y0 < y1:
        canvas[y0:y1, x0:x1] = color


def _plot(canvas: np.ndarray, xs: np.ndarray, ys: np.ndarray, color: Color) -> None:
    h, w, _ = canvas.shape
    inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    canvas[ys[inside], xs[inside]] = color


def draw_line(canvas: np.ndarray, x0: float, y0: float, x1: float, y1: float, color: Color,
              thickness: int = 1) -> None:
    """A straight segment, one sample per pixel along its longer axis, `thickness` pixels wide."""
    n = int(math.ceil(max(abs(x1 - x0), abs(y1 - y0)))) + 1
    xs = np.rint(np.linspace(x0, x1, n)).astype(np.int64)
    ys = np.rint(np.linspace(y0, y1, n)).astype(np.int64)
    lo = -(thickness // 2)
    for dx in range(lo, lo + thickness):
        for dy in range(lo, lo + thickness):
            _plot(canvas, xs + dx, ys + dy, color)


def text_width(text: str, scale: int = 1) -> int:
    """Pixels `text` takes: 5 columns per glyph plus one of spacing between glyphs."""
    return max(0, len(text) * (GLYPH_W + 1) - 1) * scale


def text_height(scale: int = 1) -> int:
    return GLYPH_H * scale


def text_mask(text: str, scale: int = 1) -> np.ndarray:
    """A boolean (7*scale, text_width) bitmap of `text`; unknown characters render as '?'."""
    mask = np.zeros((GLYPH_H, max(text_width(text), 0)), dtype=bool)
    for i, ch in enumerate(text.upper()):
        x = i * (GLYPH_W + 1)
        mask[:, x:x + GLYPH_W] = FONT.get(ch, FONT["?"])
    return np.kron(mask, np.ones((scale, scale), dtype=bool)).astype(bool) if scale > 1 else mask


def blit_mask(canvas: np.ndarray, mask: np.ndarray, x: int, y: int, color: Color) -> None:
    """Paint the set pixels of `mask` with its top-left corner at (x, y), clipped."""
    ys, xs = np.nonzero(mask)
    _plot(canvas, xs + x, ys + y, color)


def draw_text(canvas: np.ndarray, x: int, y: int, text: str, color: Color = BLACK,
              scale: int = 1) -> None:
    """`text` with its top-left corner at (x, y)."""
    blit_mask(canvas, text_mask(text, scale), x, y, color)


# ---- ticks -------------------------------------------------------------------------------------
def nice_step(span: float, max_ticks: int) -> float:
    """The 1-2-5 step that puts at most about `max_ticks` ticks on `span`."""
    raw = span / max(1, max_ticks)
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * magnitude >= raw * (1 - 1e-9):
            return m * magnitude
    return 10.0 * magnitude


def nice_ticks(lo: float, hi: float, max_ticks: int = 6, expand: bool = True,
               integer: bool = False) -> tuple[float, float, list[float]]:
    """(axis_lo, axis_hi, ticks) for data in [lo, hi].

    With `expand` the axis grows to the enclosing multiples of the step (so the first and last
    ticks are the axis ends); otherwise the axis is [lo, hi] and only ticks inside it are kept.
    `integer` keeps the step at 1 or more (for counts such as commit numbers).
    """
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        lo, hi = (lo - 1, hi + 1) if not integer else (lo, hi + 1)
    step = nice_step(hi - lo, max_ticks)
    if integer:
        step = max(1.0, round(step))
    first = math.floor(lo / step + 1e-9) * step if expand else math.ceil(lo / step - 1e-9) * step
    last = math.ceil(hi / step - 1e-9) * step if expand else math.floor(hi / step + 1e-9) * step
    count = int(round((last - first) / step)) + 1
    ticks = [round(first + i * step, 10) for i in range(count)]
    return (first, last, ticks) if expand else (lo, hi, ticks)


def format_tick(value: float, step: float) -> str:
    """A short label: thousands as K and millions as M when the step allows, else just enough decimals."""
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(step) >= factor / 10 and abs(value) >= factor:
            return format_tick(value / factor, step / factor) + suffix
    decimals = 0 if step >= 1 or step <= 0 else min(6, -math.floor(math.log10(step) + 1e-9))
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


# ---- the chart ---------------------------------------------------------------------------------
@dataclass
class Chart:
    """A rendered chart: the canvas and the mapping from data to pixel coordinates."""

    canvas: np.ndarray
    left: int
    top: int
    right: int
    bottom: int
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    colors: dict[str, Color]

    def to_pixel(self, x: float, y: float) -> tuple[float, float]:
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        px = self.left + (x - x0) / (x1 - x0) * (self.right - self.left)
        py = self.bottom - (y - y0) / (y1 - y0) * (self.bottom - self.top)
        return px, py


def render_line_chart(series: Mapping[str, Sequence[float]], title: str, x_label: str,
                      y_label: str, width: int = 800, height: int = 450, x_start: float = 1,
                      scale: int = 2) -> Chart:
    """Draw the chart into a canvas: point i of a series sits at x = x_start + i.

    Non-finite values leave a gap in their series. `scale` enlarges the 5x7 font.
    """
    canvas = new_canvas(width, height)
    names = list(series)
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    values = [float(v) for s in series.values() for v in s if math.isfinite(float(v))]
    n_points = max((len(s) for s in series.values()), default=0)
    y_lo, y_hi = (min(0.0, min(values)), max(values)) if values else (0.0, 1.0)
    y_axis_lo, y_axis_hi, y_ticks = nice_ticks(y_lo, y_hi, max_ticks=6, expand=True)
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0
    x_lo, x_hi = x_start, x_start + max(n_points - 1, 1)
    integer_x = float(x_start).is_integer()
    _, _, x_ticks = nice_ticks(x_lo, x_hi, max_ticks=10, expand=False, integer=integer_x)
    x_step = x_ticks[1] - x_ticks[0] if len(x_ticks) > 1 else 1.0

    th = text_height(scale)
    pad = 4 * scale
    y_tick_labels = [format_tick(t, y_step) for t in y_ticks]
    tick_len = 3 * scale
    left = pad + th + pad + max(text_width(s, scale) for s in y_tick_labels) + tick_len + pad
    top = pad + th + pad + (th + 2 * pad if names else pad)  # title, then the legend row
    right = width - pad - text_width(format_tick(x_ticks[-1], x_step), scale) // 2 - pad
    bottom = height - pad - th - pad - th - tick_len - pad
    if right - left < 10 or bottom - top < 10:
        raise ValueError(f"{width}x{height} is too small for this chart")
    chart = Chart(canvas, left, top, right, bottom, (x_lo, x_hi), (y_axis_lo, y_axis_hi), colors)

    # Title, centred.
    draw_text(canvas, (width - text_width(title, scale)) // 2, pad, title, BLACK, scale)
    # Legend: one row under the title, centred: a colour swatch then the name per series.
    swatch = 4 * th // 3
    entries = [swatch + pad + text_width(name, scale) for name in names]
    x = (width - (sum(entries) + 3 * pad * max(len(entries) - 1, 0))) // 2
    y = pad + th + pad
    for name, entry in zip(names, entries, strict=True):
        fill_rect(canvas, x, y + th // 2 - scale, x + swatch, y + th // 2 + scale, colors[name])
        draw_text(canvas, x + swatch + pad, y, name, BLACK, scale)
        x += entry + 3 * pad
    # Grid lines and y ticks with labels.
    for tick, label in zip(y_ticks, y_tick_labels, strict=True):
        py = int(round(chart.to_pixel(x_lo, tick)[1]))
        draw_line(canvas, left, py, right, py, GRID)
        draw_line(canvas, left - tick_len, py, left, py, AXIS)
        draw_text(canvas, left - tick_len - pad // 2 - text_width(label, scale), py - th // 2,
                  label, BLACK, scale)
    # x ticks with labels.
    for tick in x_ticks:
        px = int(round(chart.to_pixel(tick, y_axis_lo)[0]))
        draw_line(canvas, px, bottom, px, bottom + tick_len, AXIS)
        label = format_tick(tick, x_step)
        draw_text(canvas, px - text_width(label, scale) // 2, bottom + tick_len + pad // 2, label,
                  BLACK, scale)
    # Axes.
    draw_line(canvas, left, top, left, bottom, AXIS)
    draw_line(canvas, left, bottom, right, bottom, AXIS)
    # Axis labels: x centred under the tick labels, y rotated to read bottom to top.
    draw_text(canvas, (left + right - text_width(x_label, scale)) // 2, height - pad - th,
              x_label, BLACK, scale)
    y_mask = np.rot90(text_mask(y_label, scale))
    blit_mask(canvas, y_mask, pad, (top + bottom - y_mask.shape[0]) // 2, BLACK)
    # The series, in order (later ones on top), two pixels wide.
    for name, points in series.items():
        previous: tuple[float, float] | None = None
        for i, v in enumerate(points):
            if not math.isfinite(float(v)):
                previous = None
                continue
            current = chart.to_pixel(x_start + i, float(v))
            if previous is not None:
                draw_line(canvas, *previous, *current, colors[name], thickness=2)
            elif len(points) == 1:
                draw_line(canvas, *current, *current, colors[name], thickness=4)
            previous = current
    return chart


def line_chart(path: str | Path, series: Mapping[str, Sequence[float]], title: str,
               x_label: str, y_label: str, width: int = 800, height: int = 450,
               x_start: float = 1) -> Chart:
    """Render a line chart of `series` (name -> y values at x = x_start, x_start + 1, ...) and
    write it to `path` as a PNG; returns the rendered chart."""
    chart = render_line_chart(series, title, x_label, y_label, width, height, x_start)
    write_png(path, chart.canvas)
    return chart
