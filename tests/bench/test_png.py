"""bench/png.py: valid PNG bytes, and charts that draw what they are given where they should."""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from bench import png


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, payload) of every chunk, checking each CRC on the way."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks = []
    pos = 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        payload = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + payload) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        chunks.append((kind, payload))
        pos += 12 + length
    assert pos == len(data)
    return chunks


def _decode(data: bytes) -> np.ndarray:
    """Pixels of a PNG as encode_png writes it (8-bit RGB, filter 0), checking the layout."""
    chunks = _chunks(data)
    kinds = [k for k, _ in chunks]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    width, height, depth, color_type, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", chunks[0][1])
    assert (depth, color_type, compression, filtering, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(p for k, p in chunks if k == b"IDAT"))
    assert len(raw) == height * (1 + 3 * width)
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, 1 + 3 * width)
    assert not rows[:, 0].any(), "every scanline uses filter type 0"
    return rows[:, 1:].reshape(height, width, 3)


def test_encode_png_round_trips_pixels() -> None:
    rng = np.random.default_rng(3)
    canvas = rng.integers(0, 256, size=(7, 11, 3), dtype=np.uint8)
    data = png.encode_png(canvas)
    ihdr = _chunks(data)[0][1]
    assert struct.unpack(">II", ihdr[:8]) == (11, 7)
    assert np.array_equal(_decode(data), canvas)


def test_encode_png_rejects_bad_canvases() -> None:
    with pytest.raises(ValueError):
        png.encode_png(np.zeros((4, 4), dtype=np.uint8))
    with pytest.raises(ValueError):
        png.encode_png(np.zeros((4, 4, 3), dtype=np.float64))
    with pytest.raises(ValueError):
        png.encode_png(np.zeros((0, 4, 3), dtype=np.uint8))


def test_line_chart_writes_a_valid_png(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "chart.png"
    chart = png.line_chart(path, {"a": [1, 3, 2, 5], "b": [2, 2, 4, 1]}, "Title: x/y (max)",
                           "commit", "sorted runs", width=320, height=200)
    data = path.read_bytes()
    pixels = _decode(data)
    assert pixels.shape == (200, 320, 3)
    assert np.array_equal(pixels, chart.canvas)
    assert len({tuple(p) for p in pixels.reshape(-1, 3)}) > 4  # not a blank image


def _pixel(chart: png.Chart, x: float, y: float) -> tuple[int, int, int]:
    px, py = chart.to_pixel(x, y)
    r, g, b = chart.canvas[int(round(py)), int(round(px))]
    return int(r), int(g), int(b)


def test_each_series_is_drawn_in_its_own_colour_where_its_points_are() -> None:
    chart = png.render_line_chart({"low": [2, 2, 2, 2], "high": [8, 8, 8, 8]}, "t", "x", "y",
                                  width=400, height=300)
    low, high = png.PALETTE[0], png.PALETTE[1]
    assert low != high
    for x in (1.5, 2, 3.5):
        assert _pixel(chart, x, 2) == low
        assert _pixel(chart, x, 8) == high
        assert _pixel(chart, x, 5) != low and _pixel(chart, x, 5) != high
    # Axes: x starts at 1 and ends at the last point; y starts at 0 and covers 8.
    assert chart.x_range == (1, 4)
    assert chart.y_range[0] == 0 and chart.y_range[1] >= 8


def test_adding_a_series_changes_only_pixels_along_it_and_in_the_legend() -> None:
    base = png.render_line_chart({"up": [0, 10]}, "t", "x", "y", width=400, height=300)
    both = png.render_line_chart({"up": [0, 10], "down": [10, 0]}, "t", "x", "y",
                                 width=400, height=300)
    assert (base.left, base.top, base.right, base.bottom) == (both.left, both.top, both.right, both.bottom)
    assert base.y_range == both.y_range
    changed = np.any(base.canvas != both.canvas, axis=2)
    legend = changed[:both.top]
    plot = changed[both.top:both.bottom + 1, both.left:both.right + 1]
    assert legend.any() and plot.any()
    # Every changed pixel of the plot lies on the "down" segment from (1, 10) to (2, 0).
    (x0, y0), (x1, y1) = both.to_pixel(1, 10), both.to_pixel(2, 0)
    ys, xs = np.nonzero(plot)
    xs, ys = xs + both.left, ys + both.top
    distance = np.abs((y1 - y0) * xs - (x1 - x0) * ys + x1 * y0 - y1 * x0) / math.hypot(x1 - x0, y1 - y0)
    assert distance.max() <= 2.0
    assert _pixel(both, 1.5, 5) in (png.PALETTE[1], png.PALETTE[0])
    assert _pixel(both, 1.25, 7.5) == png.PALETTE[1]
    assert _pixel(base, 1.25, 7.5) != png.PALETTE[1]


def test_nan_leaves_a_gap() -> None:
    chart = png.render_line_chart({"a": [4, 4, float("nan"), 4, 4]}, "t", "x", "y",
                                  width=400, height=300)
    assert _pixel(chart, 1.5, 4) == png.PALETTE[0]
    assert _pixel(chart, 2.5, 4) != png.PALETTE[0]
    assert _pixel(chart, 4.5, 4) == png.PALETTE[0]


def test_text_uses_the_bitmap_font() -> None:
    canvas = png.new_canvas(60, 20)
    png.draw_text(canvas, 2, 3, "10", png.BLACK)
    ink = np.all(canvas == 0, axis=2)
    assert np.array_equal(ink[3:10, 2:7], png.FONT["1"])
    assert np.array_equal(ink[3:10, 8:13], png.FONT["0"])
    assert ink.sum() == png.FONT["1"].sum() + png.FONT["0"].sum()
    assert png.text_width("10") == 11 and png.text_width("10", 2) == 22
    assert np.array_equal(png.text_mask("~"), png.FONT["?"])  # unknown characters
    assert np.array_equal(png.text_mask("a"), png.FONT["A"])  # lower case is drawn upper case
    assert png.text_mask("ab", 3).shape == (21, 33)


def test_every_glyph_is_5_by_7_and_distinct() -> None:
    shapes = {g.shape for g in png.FONT.values()}
    assert shapes == {(7, 5)}
    drawn = [g.tobytes() for ch, g in png.FONT.items()]
    assert len(set(drawn)) == len(drawn)
    assert set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ .,-+():/%") <= set(png.FONT)


def test_ticks_and_labels() -> None:
    assert png.nice_ticks(0, 7.3) == (0.0, 8.0, [0.0, 2.0, 4.0, 6.0, 8.0])
    lo, hi, ticks = png.nice_ticks(1, 50, max_ticks=10, expand=False, integer=True)
    assert (lo, hi) == (1, 50) and ticks == [5, 10, 15, 20, 25, 30, 35, 40, 45, 50]
    assert png.nice_ticks(1, 3, max_ticks=10, expand=False, integer=True)[2] == [1, 2, 3]
    assert png.format_tick(1_500_000, 500_000) == "1.5M"
    assert png.format_tick(250_000, 50_000) == "250K"
    assert png.format_tick(0.25, 0.05) == "0.25"
    assert png.format_tick(4.0, 2.0) == "4"
