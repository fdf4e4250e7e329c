"""Running one function over several items on threads: the engine's one thread-pool shape.

Parquet decoding and encoding, Arrow's sort and take all release the GIL, so the engine reads
files, flushes buckets, gathers columns and compacts buckets on up to one thread per core.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, Full, Queue
from typing import Any, TypeVar

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


def prefetch(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """`items` as they come, produced on a background thread up to `depth` items ahead.

    A producer and a consumer that both release the GIL (a merge and a parquet encoder) then run
    on two cores; memory holds at most `depth` items besides the two being worked on. The
    producer's exception is raised in the consumer; a consumer that stops early stops it.
    """
    queue: Queue[tuple[bool, Any]] = Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        queue.put((True, item), timeout=0.1)
                        break
                    except Full:
                        continue
                if stop.is_set():
                    return
            queue.put((False, None))
        except BaseException as e:  # handed to the consumer, who raises it
            queue.put((False, e))

    thread = threading.Thread(target=produce, name="prefetch", daemon=True)
    thread.start()
    try:
        while True:
            more, value = queue.get()
            if not more:
                if value is not None:
                    raise value
                return
            yield value
    finally:
        stop.set()
        while thread.is_alive():
            with contextlib.suppress(Empty):
                queue.get(timeout=0.1)
        close = getattr(items, "close", None)
        if close is not None:
            close()
