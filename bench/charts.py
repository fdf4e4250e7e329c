"""The benchmarks' charts (docs/*.png), drawn with matplotlib's Agg backend (no display needed).

    line_chart("docs/chart.png", {"a": [1, 3, 2], "b": [2, 2, 4]}, "Title", "x", "y")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DPI = 100


def render_line_chart(series: Mapping[str, Sequence[float]], title: str, x_label: str,
                      y_label: str, width: int = 800, height: int = 450,
                      x_start: float = 1) -> Figure:
    """A `width` x `height` pixel line chart: one line per series (name -> y values at x =
    x_start, x_start + 1, ...), in matplotlib's default colour cycle; NaN leaves a gap."""
    if not series:
        raise ValueError("a line chart needs at least one series")
    fig = plt.figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    for name, ys in series.items():
        ax.plot([x_start + i for i in range(len(ys))], list(ys), label=name, linewidth=2.5)
    ax.set_title(title)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, color="#e2e2e2")
    fig.legend(loc="outside lower center", ncols=len(series), frameon=False)  # off the lines
    return fig


def line_chart(path: str | Path, series: Mapping[str, Sequence[float]], title: str,
               x_label: str, y_label: str, width: int = 800, height: int = 450,
               x_start: float = 1) -> Path:
    """Render `render_line_chart` and write it to `path` as a PNG (folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = render_line_chart(series, title, x_label, y_label, width, height, x_start)
    try:
        fig.savefig(path, format="png", dpi=DPI)
    finally:
        plt.close(fig)
    return path
