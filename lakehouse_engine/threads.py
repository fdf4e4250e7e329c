"""Running one function over several items on threads: the engine's one thread-pool shape.

Parquet decoding and encoding, Arrow's sort and take all release the GIL, so the engine reads
files, flushes buckets, gathers columns and compacts buckets on up to one thread per core.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, Full, Queue
from typing import Any, Generic, TypeVar

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
    ahead = _ReadAhead(items, depth)
    try:
        yield from ahead.drain()
    finally:
        ahead.close()


def ordered_streams(streams: Sequence[Callable[[], Iterator[T]]], max_threads: int | None = None,
                    depth: int = 1) -> Iterator[T]:
    """The items of every stream, in the order `for s in streams: yield from s()` gives them, with
    up to `max_threads` streams (default one per core) produced at once, each on a thread of its
    own and at most `depth` items ahead of the consumer.

    Memory holds at most `max_threads * (depth + 1)` items besides the consumer's: a stream starts
    when one before it is used up. A stream's exception is raised in the consumer when it reaches
    that stream's place; a consumer that stops early stops every stream it started.
    """
    todo = list(streams)
    window = min(len(todo), max_threads if max_threads is not None else cores())
    if window <= 1:
        for stream in todo:
            yield from stream()
        return
    active: deque[_ReadAhead[T]] = deque()
    started = 0
    # Daemon threads, not a ThreadPoolExecutor's: a reader left unfinished until the interpreter
    # exits must not keep it waiting for a producer blocked on a full queue.
    try:
        while active or started < len(todo):
            while started < len(todo) and len(active) < window:
                active.append(_ReadAhead(todo[started](), depth))
                started += 1
            yield from active[0].drain()
            active.popleft().close()
    finally:
        for ahead in active:
            ahead.close()


class _ReadAhead(Generic[T]):
    """An iterator produced on a daemon thread from construction on, into a queue of `depth`
    items; `drain` hands them over in order, `close` stops the producer and closes the iterator."""

    def __init__(self, items: Iterator[T], depth: int):
        self._items = items
        self._queue: Queue[tuple[bool, Any]] = Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = threading.Event()
        threading.Thread(target=self._produce, name="prefetch", daemon=True).start()

    def _produce(self) -> None:
        try:
            for item in self._items:
                while not self._stop.is_set():
                    try:
                        self._queue.put((True, item), timeout=0.1)
                        break
                    except Full:
                        continue
                if self._stop.is_set():
                    return
            self._queue.put((False, None))
        except BaseException as e:  # handed to the consumer, who raises it
            self._queue.put((False, e))
        finally:
            self._finished.set()

    def drain(self) -> Iterator[T]:
        """The items, in order, until the iterator ends (its exception raised here)."""
        while True:
            more, value = self._queue.get()
            if not more:
                if value is not None:
                    raise value
                return
            yield value

    def close(self) -> None:
        """Stop the producer (unblocking it) and close the iterator once the producer has left it."""
        self._stop.set()
        while not self._finished.is_set():
            if sys.is_finalizing():
                # Closed as the interpreter exits (a reader held to the end): the daemon producer
                # is frozen and will never finish; the process ends it.
                return
            with contextlib.suppress(Empty):
                self._queue.get(timeout=0.1)
        close = getattr(self._items, "close", None)
        if close is not None:
            close()
