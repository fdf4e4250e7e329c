"""Two snapshot expiries at once: the one that finds a file gone because the other deleted it carries
on; neither reports corruption, and every snapshot left reads and has all its files."""

from __future__ import annotations

import multiprocessing as mp
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.io import FileIO, FileStatus
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.maintenance.helpers import (
    fresh,
    keyed_table,
    missing_files,
    state,
    upsert,
)

OPTIONS = {"write-only": "true", "num-sorted-run.compaction-trigger": "2"}


def _history(catalog: Catalog, name: str) -> tuple[FileStoreTable, dict[int, dict[int, int]]]:
    """Ten snapshots, two of them full compactions (their deltas delete files), and the state
    each snapshot holds."""
    table = keyed_table(catalog, name, options=OPTIONS)
    states = {}
    for i in range(10):
        if i in (3, 7):
            table.compact(full=True)
        else:
            upsert(table, range(i, i + 5), i)
        states[table.latest_snapshot().id] = state(table)
    return table, states


class _EveryIO(FileIO):
    """A local FileIO that calls `observe()` before every read, listing and write: another
    process may act between any two of them."""

    def __init__(self, observe: Callable[[], None]):
        super().__init__(pafs.LocalFileSystem())
        self.observe = observe

    def read_bytes(self, path: str) -> bytes:
        self.observe()
        return super().read_bytes(path)

    def exists(self, path: str) -> bool:
        self.observe()
        return super().exists(path)

    def list_status(self, path: str, recursive: bool = False) -> list[FileStatus]:
        self.observe()
        return super().list_status(path, recursive)

    def delete_file(self, path: str, quiet: bool = True) -> None:
        self.observe()
        super().delete_file(path, quiet)


def _observed(table: FileStoreTable, observe: Callable[[], None]) -> FileStoreTable:
    return FileStoreTable(_EveryIO(observe), table.name, table.path, table.schema)


def _copy(table: FileStoreTable, to: Path) -> FileStoreTable:
    shutil.copytree(table.path, to)
    return FileStoreTable(table.file_io, table.name, str(to), table.schema)


def _check(table: FileStoreTable, states: dict[int, dict[int, int]]) -> None:
    t = fresh(table)
    assert missing_files(t) == set()
    for sid in t.snapshot_manager().list_snapshot_ids():
        assert state(t, sid) == states[sid]


@pytest.mark.parametrize(("first", "second"), [(6, 2), (2, 6), (3, 3)],
                         ids=["second-goes-further", "first-goes-further", "same-bounds"])
def test_an_expiry_running_at_any_step_of_another_never_reports_corruption(
        catalog: Catalog, tmp_path: Path, first: int, second: int) -> None:
    table, states = _history(catalog, "t")
    # Count the first expiry's mutating operations on a copy, then interleave at each of them.
    steps = 0

    def count() -> None:
        nonlocal steps
        steps += 1
    _observed(_copy(table, tmp_path / "count"), count).expire_snapshots(retain_max=first)
    assert steps > 5
    for k in range(steps):
        copy = _copy(table, tmp_path / f"k{k}")
        seen = 0

        def other_expiry(copy: FileStoreTable = copy, k: int = k) -> None:
            nonlocal seen
            seen += 1
            if seen == k + 1:  # the other expiry runs whole, between two operations of this one
                fresh(copy).expire_snapshots(retain_max=second)
                clear_manifest_cache()  # this one is another process: it has not read them yet
        _observed(copy, other_expiry).expire_snapshots(retain_max=first)
        _check(copy, states)
        assert len(fresh(copy).snapshot_manager().list_snapshot_ids()) == min(first, second)


def _expire_in_process(warehouse: str, keep: int, start: Any, errors: Any) -> None:
    from lakehouse_engine import Catalog

    try:
        table = Catalog(warehouse).get_table("db.t")
        start.wait()
        table.expire_snapshots(retain_max=keep)
    except BaseException as exc:  # reported to the test, which fails on any
        errors.put(repr(exc))


@pytest.mark.slow  # spawned processes: 20 s; the interleaving test above covers every step
def test_expiries_racing_in_processes_never_report_corruption(catalog: Catalog) -> None:
    table, states = _history(catalog, "t")
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    for first, second in ((8, 7), (5, 3)):
        start = ctx.Event()
        procs = [ctx.Process(target=_expire_in_process, args=(catalog.warehouse, keep, start, errors))
                 for keep in (first, second)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0
        assert errors.empty(), errors.get()
        _check(table, states)
        assert len(fresh(table).snapshot_manager().list_snapshot_ids()) == second
