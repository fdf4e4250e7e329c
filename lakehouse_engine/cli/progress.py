"""A one-line progress bar on stderr, for commands whose work can take a while."""

from __future__ import annotations

import shutil
import threading
import time
from types import TracebackType
from typing import TextIO

_SPINNER = "|/-\\"
_REDRAW_SECONDS = 0.1
_FIRST_DRAW_SECONDS = 0.25


class Progress:
    """A bar with counts when the amount of work is known, else a spinner with the elapsed time.

    The engine's maintenance calls report nothing while they run, so those show the spinner; a
    background thread redraws so the elapsed time keeps moving. Disabled, every method is a no-op.
    Nothing is drawn for work that ends within a quarter of a second; a drawn line is erased
    when the work ends, leaving stderr clean for the result or an error.
    """

    def __init__(self, stream: TextIO, label: str, total: int | None = None, unit: str = "",
                 enabled: bool = True):
        self.stream = stream
        self.label = label
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.done = 0
        self._started = time.monotonic()
        self._tick = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0

    def __enter__(self) -> Progress:
        if self.enabled:
            self._started = time.monotonic()
            self._thread = threading.Thread(target=self._redraw_until_stopped, daemon=True,
                                            name="lakehouse-progress")
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def advance(self, amount: int = 1) -> None:
        """Count `amount` more units of work as done."""
        with self._lock:
            self.done += amount

    def close(self) -> None:
        """Stop redrawing and erase the line."""
        if not self.enabled or self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        with self._lock:
            if self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()

    # ---- drawing --------------------------------------------------------------------------
    def _redraw_until_stopped(self) -> None:
        # Work that ends quickly draws nothing: no flicker on a terminal for a fast command.
        if self._stop.wait(_FIRST_DRAW_SECONDS):
            return
        self._draw()
        while not self._stop.wait(_REDRAW_SECONDS):
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            text = self.render(shutil.get_terminal_size((80, 24)).columns - 1)
            self._tick += 1
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._width = len(text)

    def render(self, columns: int) -> str:
        """The current line, at most `columns` characters wide."""
        elapsed = f"{time.monotonic() - self._started:.1f}s"
        unit = f" {self.unit}" if self.unit else ""
        if self.total is None:
            text = f"{self.label} {_SPINNER[self._tick % len(_SPINNER)]} {elapsed}"
            return text[:columns]
        total = max(self.total, 0)
        done = min(self.done, total) if total else self.done
        counts = f" {done}/{total}{unit} {elapsed}"
        bar_width = max(0, min(40, columns - len(self.label) - len(counts) - 3))
        if bar_width < 5:
            return (self.label + counts)[:columns]
        filled = bar_width if total == 0 else bar_width * done // total
        bar = "=" * filled + (">" if filled < bar_width else "") + " " * (bar_width - filled - 1)
        return f"{self.label} [{bar[:bar_width]}]{counts}"[:columns]
