"""The engine's thread shapes (`lakehouse_engine.threads`).

Specification: `ordered_streams` yields every item of its streams in the order a serial loop
over them gives, with up to `max_threads` streams produced at once, each at most `depth` items
ahead; a stream's error surfaces at its place; a consumer that stops early stops and closes
every stream it started; `prefetch` is one stream read ahead.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from lakehouse_engine.threads import ordered_streams, prefetch


def _counted(name: str, n: int, log: list[tuple[str, int]], lock: threading.Lock) -> Callable[[], Iterator[str]]:
    def stream() -> Iterator[str]:
        for i in range(n):
            with lock:
                log.append((name, i))
            yield f"{name}{i}"
    return stream


def test_items_come_in_the_order_of_a_serial_loop_whatever_the_threads() -> None:
    lock = threading.Lock()
    streams = [_counted(c, n, [], lock) for c, n in zip("abcde", (3, 0, 5, 1, 4), strict=True)]
    serial = [x for s in streams for x in s()]
    for threads in (1, 2, 3, 8):
        assert list(ordered_streams(streams, threads)) == serial


def test_several_streams_are_produced_at_once() -> None:
    # Each of the first two streams waits for the other to start: only concurrent producers pass.
    meet = threading.Barrier(2, timeout=20)

    def stream(name: str) -> Callable[[], Iterator[str]]:
        def produce() -> Iterator[str]:
            meet.wait()
            yield name
        return produce

    assert list(ordered_streams([stream("a"), stream("b")], 2)) == ["a", "b"]


def test_no_more_than_max_threads_streams_run_ahead_each_at_most_depth_items() -> None:
    lock = threading.Lock()
    log: list[tuple[str, int]] = []
    streams = [_counted(c, 10, log, lock) for c in "abcd"]
    out = ordered_streams(streams, 2, depth=1)
    assert next(out) == "a0"
    # Give the producers time to run as far ahead as they may.
    for _ in range(50):
        threading.Event().wait(0.01)
    with lock:
        produced = {name for name, _ in log}
        ahead = {name: max(i for n, i in log if n == name) for name in produced}
    assert produced <= {"a", "b"}  # c and d wait for a stream before them to end
    # One item taken (a0); per stream one queued and one produced, waiting to be queued.
    assert ahead["a"] <= 2 and ahead.get("b", -1) <= 1
    assert list(out) == [f"{c}{i}" for c in "abcd" for i in range(10)][1:]


def test_a_streams_error_surfaces_at_its_place() -> None:
    def failing() -> Iterator[str]:
        yield "b0"
        raise ValueError("b broke")

    got = []
    lock = threading.Lock()
    with pytest.raises(ValueError, match="b broke"):
        for x in ordered_streams([_counted("a", 3, [], lock), failing, _counted("c", 2, [], lock)], 3):
            got.append(x)
    assert got == ["a0", "a1", "a2", "b0"]


def test_a_consumer_that_stops_early_stops_and_closes_every_stream() -> None:
    closed = []

    def endless(name: str) -> Callable[[], Iterator[str]]:
        def produce() -> Iterator[str]:
            try:
                while True:
                    yield name
            finally:
                closed.append(name)
        return produce

    before = threading.active_count()
    out = ordered_streams([endless("a"), endless("b"), endless("c")], 2)
    assert isinstance(out, Generator)
    assert [next(out) for _ in range(3)] == ["a", "a", "a"]
    out.close()
    assert sorted(closed) == ["a", "b"]  # c never started
    assert threading.active_count() == before


def test_prefetch_is_one_stream_read_ahead() -> None:
    assert list(prefetch(iter(range(5)))) == list(range(5))

    def failing() -> Iterator[int]:
        yield 1
        raise KeyError("gone")

    with pytest.raises(KeyError):
        list(prefetch(failing()))


def test_a_reader_left_unfinished_does_not_keep_the_interpreter_from_exiting() -> None:
    # A lazy read held until exit, its producers blocked on full queues: closing it as the
    # interpreter exits must not wait for them (daemon threads, frozen by then).
    code = ("import itertools\n"
            "from lakehouse_engine.threads import ordered_streams, prefetch\n"
            "HELD = ordered_streams([itertools.count, itertools.count], 2)\n"
            "assert next(HELD) == 0\n"
            "AHEAD = prefetch(itertools.count())\n"
            "assert next(AHEAD) == 0\n"
            "print('done')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"
