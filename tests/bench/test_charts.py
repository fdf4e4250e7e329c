"""bench/charts.py: PNG files of the requested size, each series drawn in its own colour where
its points are, gaps at NaN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from bench import charts

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _pixels(fig: Figure) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)  # type: ignore[attr-defined]


def _at(fig: Figure, pixels: np.ndarray, x: float, y: float) -> np.ndarray:
    """The pixel at data point (x, y): of the 3x3 around it, the least white (the line's core)."""
    px, py = fig.axes[0].transData.transform((x, y))
    row, col = int(pixels.shape[0] - py), int(px)
    around = pixels[row - 1:row + 2, col - 1:col + 2].reshape(-1, 3)
    return around[around.sum(axis=1).argmin()]


def _colour(i: int) -> np.ndarray:
    return (np.array(to_rgb(f"C{i}")) * 255).round().astype(int)


def test_line_chart_writes_a_png_of_the_size_asked(tmp_path: Path) -> None:
    path = charts.line_chart(tmp_path / "sub" / "chart.png", {"a": [1, 3, 2, 5], "b": [2, 2, 4, 1]},
                             "Title: x/y (max)", "commit", "sorted runs", width=320, height=200)
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (320, 200)


def test_each_series_is_drawn_in_its_own_colour_where_its_points_are() -> None:
    fig = charts.render_line_chart({"low": [2, 2, 2, 2], "high": [8, 8, 8, 8]}, "t", "x", "y",
                                   width=400, height=300)
    pixels = _pixels(fig)
    low, high = _colour(0), _colour(1)
    for x in (1.5, 2, 3.5):
        assert np.abs(_at(fig, pixels, x, 2) - low).max() <= 12
        assert np.abs(_at(fig, pixels, x, 8) - high).max() <= 12
        assert np.abs(_at(fig, pixels, x, 5) - low).max() > 60
    ax = fig.axes[0]
    assert ax.get_xlim()[0] <= 1 and ax.get_xlim()[1] >= 4
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 8
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["low", "high"]


def test_nan_leaves_a_gap() -> None:
    fig = charts.render_line_chart({"a": [4, 4, float("nan"), 4, 4]}, "t", "x", "y",
                                   width=400, height=300)
    pixels = _pixels(fig)
    assert np.abs(_at(fig, pixels, 1.5, 4) - _colour(0)).max() <= 12
    assert np.abs(_at(fig, pixels, 2.5, 4) - _colour(0)).max() > 60
    assert np.abs(_at(fig, pixels, 4.5, 4) - _colour(0)).max() <= 12


def test_a_chart_without_series_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one series"):
        charts.render_line_chart({}, "t", "x", "y")
