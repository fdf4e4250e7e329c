"""A one-line progress display on stderr (rich), for commands whose work can take a while."""

from __future__ import annotations

import io
import threading
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress

_FIRST_DRAW_SECONDS = 0.25
_REDRAWS_PER_SECOND = 10


class Progress:
    """A bar with counts when the amount of work is known, else a spinner with the elapsed time.

    The engine's maintenance calls report nothing while they run, so those show the spinner;
    rich redraws from its own thread so the elapsed time keeps moving. Disabled, every method is
    a no-op. Nothing is drawn for work that ends within a quarter of a second; a drawn line is
    erased when the work ends, leaving stderr clean for the result or an error.
    """

    def __init__(self, stream: TextIO, label: str, total: int | None = None, unit: str = "",
                 enabled: bool = True):
        self.stream = stream
        self.label = label
        self.total = total
        self.unit = unit
        self.enabled = enabled
        # The caller decided to draw (a terminal, or --progress): draw even into a pipe or file.
        console = Console(file=stream, force_terminal=True, highlight=False, emoji=False)
        self._progress = RichProgress(*_columns(total, unit), console=console, transient=True,
                                      auto_refresh=True, refresh_per_second=_REDRAWS_PER_SECOND)
        self._task = self._progress.add_task(label, total=total)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._drawing = False
        self._closed = False

    @property
    def done(self) -> int:
        return int(self._progress.tasks[0].completed)

    def __enter__(self) -> Progress:
        if self.enabled:
            self._timer = threading.Timer(_FIRST_DRAW_SECONDS, self._start)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def advance(self, amount: int = 1) -> None:
        """Count `amount` more units of work as done."""
        self._progress.advance(self._task, amount)

    def close(self) -> None:
        """Stop redrawing and erase the line."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._drawing:
                self._progress.stop()
                self._drawing = False

    def _start(self) -> None:
        # Work that ends quickly draws nothing: no flicker on a terminal for a fast command.
        with self._lock:
            if not self._closed:
                self._progress.start()
                self._drawing = True

    def render(self, columns: int) -> str:
        """The current line as plain text, at most `columns` characters wide."""
        out = io.StringIO()
        Console(file=out, width=columns, color_system=None, force_terminal=False,
                highlight=False, emoji=False).print(self._progress.get_renderable())
        return out.getvalue().rstrip("\n")


def _columns(total: int | None, unit: str) -> list[ProgressColumn | str]:
    label = TextColumn("{task.description}", markup=False)
    if total is None:
        return [label, SpinnerColumn("line"), TimeElapsedColumn()]
    counts = [MofNCompleteColumn()] + ([TextColumn(unit, markup=False)] if unit else [])
    return [label, BarColumn(bar_width=40), *counts, TimeElapsedColumn()]
