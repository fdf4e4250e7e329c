"""Running one function over several items on threads: the engine's one thread-pool shape.

Parquet decoding and encoding, Arrow's sort and take all release the GIL, so the engine reads
files, flushes buckets, gathers columns and compacts buckets on up to one thread per core.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def cores() -> int:
    """The machine's logical CPUs (1 when unknown)."""
    return os.cpu_count() or 1


def parallel_map(fn: Callable[[T], R], items: Iterable[T], max_threads: int | None = None) -> list[R]:
    """`[fn(x) for x in items]`, in order, on up to `max_threads` threads (default: one per core),
    never more threads than items; in the calling thread when one would do."""
    todo = list(items)
    threads = min(len(todo), max_threads if max_threads is not None else cores())
    if threads <= 1:
        return [fn(x) for x in todo]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, todo))
