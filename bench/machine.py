"""Describe the benchmark machine and render result tables as Markdown."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _os_name() -> str:
    try:
        info = platform.freedesktop_os_release()
        pretty = info.get("PRETTY_NAME")
        if pretty:
            return f"{pretty} (kernel {platform.release()})"
    except (OSError, AttributeError):
        pass
    return platform.platform()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def describe_machine() -> dict[str, Any]:
    """CPU model, cores, memory, Python, pyarrow and OS of the current process's machine."""
    try:
        import pyarrow

        pyarrow_version = pyarrow.__version__
    except ImportError:  # pragma: no cover - pyarrow is a hard dependency
        pyarrow_version = "not installed"
    memory = _memory_bytes()
    return {
        "cpu": _cpu_model(),
        "cores": _usable_cores(),
        "logical_cpus": os.cpu_count(),
        "memory_bytes": memory,
        "memory": f"{memory / 2**30:.1f} GiB" if memory else "unknown",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "pyarrow": pyarrow_version,
        "os": _os_name(),
        "arch": platform.machine(),
    }


def _cell(value: Any) -> str:
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def format_markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A GitHub-flavoured Markdown table of ``rows`` restricted to ``columns``.

    Missing keys render as empty cells; floats get three decimals, ints thousands
    separators; numeric columns are right-aligned.  Ends with a newline.
    """
    if not columns:
        raise ValueError("columns must not be empty")
    numeric = [
        bool(rows)
        and all(
            isinstance(r.get(c), int | float) and not isinstance(r.get(c), bool)
            for r in rows
            if r.get(c) is not None
        )
        and any(r.get(c) is not None for r in rows)
        for c in columns
    ]
    header = "| " + " | ".join(_cell(c) for c in columns) + " |"
    rule = "|" + "|".join("---:" if num else "---" for num in numeric) + "|"
    body = ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join([header, rule, *body]) + "\n"


if __name__ == "__main__":
    for key, value in describe_machine().items():
        print(f"{key}: {value}")


def best_of_alternating(repeat: int, steps: Mapping[str, Callable[[], object]]) -> dict[str, float]:
    """Best wall seconds of each step over `repeat` rounds; each round runs every step once, in
    order, so a busy neighbour hurts all steps alike."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeat):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: min(seconds) for name, seconds in times.items()}
