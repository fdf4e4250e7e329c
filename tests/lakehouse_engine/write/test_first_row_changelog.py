"""A first-row table with `changelog-producer` = lookup gets its `+I` changelog from the compaction
that takes its writer's level 0 up (Paimon's FirstRowMergeFunctionWrapper), not from a second
lookup at flush: the older files are read once per commit, and the changes are the same rows the
flush lookup gave, over random scripts of writes, stream commits and compactions."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, CommitConflictError, Schema
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.lookup_cache import clear_caches
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.bucket_writer import BucketWriter
from tests.lakehouse_engine.conftest import read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string())])


@pytest.fixture
def flush_lookup(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The path before: the flush looks each run's keys up in the older files for the changelog."""
    init = BucketWriter.__init__

    def old_path(self: BucketWriter, context: Any, *args: Any) -> None:
        init(self, dataclasses.replace(context, first_row_changelog=False), *args)

    with monkeypatch.context() as m:
        m.setattr(BucketWriter, "__init__", old_path)
        yield


def _table(warehouse: str, options: dict[str, str]) -> FileStoreTable:
    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"],
        options={"merge-engine": "first-row", "changelog-producer": "lookup", "rowkind.field": "rk",
                 **options}))
    return catalog.get_table("db.t")


def _batch(rows: list[tuple[int, int, str]]) -> pa.Table:
    return pa.table({"id": [k for k, _, _ in rows], "v": [v for _, v, _ in rows],
                     "rk": [r for _, _, r in rows]}, schema=SCHEMA)


def _commit(table: FileStoreTable, batches: list[list[tuple[int, int, str]]]) -> None:
    wb = table.new_batch_write_builder()
    write, committer = wb.new_write(), wb.new_commit()
    for rows in batches:
        write.write_arrow(_batch(rows))
    committer.commit(write.prepare_commit())
    write.close()


def _data_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts each data file opened for reading from now on, by file name."""
    opened: Counter[str] = Counter()
    open_input = FileIO.open_input

    def counted(self: FileIO, path: str) -> Any:
        name = path.rsplit("/", 1)[-1]
        if name.startswith("data-"):
            opened[name] += 1
        return open_input(self, path)

    monkeypatch.setattr(FileIO, "open_input", counted)
    return opened


def _upsert_reads(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], set[str], FileStoreTable, int]:
    """A first-row lookup table whose base sits in two levels above 0; an upsert (half known
    keys) from a fresh process's lookup cache: each older file opened, the older files, and the
    snapshot before the upsert."""
    warehouse = tempfile.mkdtemp(prefix="first-row-reads-")
    table = _table(warehouse, {"bucket": "1"})
    _commit(table, [[(k, k, "+I") for k in range(0, 400)]])
    _commit(table, [[(k, k, "+I") for k in range(400, 800)]])
    store = table.store
    base = store.snapshot_manager().latest_snapshot()
    older = {e.file.file_name for e in store.manifest_io().live_entries(base)}
    assert len({e.file.level for e in store.manifest_io().live_entries(base)} - {0}) >= 1
    clear_caches()
    opened = _data_reads(monkeypatch)
    _commit(table, [[(k, -k, "+I") for k in range(200, 1000, 2)]])
    return opened, older, table, base.id


def test_an_upsert_opens_each_older_file_once(monkeypatch: pytest.MonkeyPatch) -> None:
    opened, older, table, base = _upsert_reads(monkeypatch)
    try:
        twice = {n: c for n, c in opened.items() if n in older and c > 1}
        assert not twice, f"older files opened more than once: {twice}"
        assert any(n in older for n in opened)  # (the compaction did look the keys up)
        changes = table.changes(base)
        assert changes.column("_row_kind").to_pylist() == ["+I"] * 100
        assert changes.column("id").to_pylist() == list(range(800, 1000, 2))
        assert changes.column("v").to_pylist() == [-k for k in range(800, 1000, 2)]
    finally:
        shutil.rmtree(table.store.path_factory.table_path.rsplit("/db.db", 1)[0], ignore_errors=True)


def test_the_flush_lookup_opened_the_older_files_twice(monkeypatch: pytest.MonkeyPatch,
                                                       flush_lookup: None) -> None:
    """What the test above guards against: the flush lookup, then the compaction, each read them."""
    opened, older, table, base = _upsert_reads(monkeypatch)
    try:
        assert any(c > 1 for n, c in opened.items() if n in older)
        assert table.changes(base).column("id").to_pylist() == list(range(800, 1000, 2))
    finally:
        shutil.rmtree(table.store.path_factory.table_path.rsplit("/db.db", 1)[0], ignore_errors=True)


# ---- property: the same changes as the flush lookup's -------------------------------------------
row = st.tuples(st.integers(0, 15), st.integers(0, 3), st.sampled_from(["+I"] * 6 + ["+U", "-D"]))
batches = st.lists(st.lists(row, min_size=1, max_size=10), min_size=1, max_size=3)
# A commit: its batches, then no compaction, a minor or a full one (a dedicated compaction).
commit = st.tuples(batches, st.sampled_from([None, None, None, False, True]))
scripts = st.tuples(st.booleans(), st.lists(commit, min_size=1, max_size=6))  # (one stream writer?, commits)

MODES = {
    "fixed": {"bucket": "3"},
    # Several flushes per commit: a later run's keys are in an earlier run of the same commit.
    "small-buffer": {"bucket": "2", "write-buffer-size": "1 kb"},
    "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "5"},
    # Compactions inside the writer (the stop trigger), then the one at commit.
    "compacting": {"bucket": "1", "num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "2",
                   "write-buffer-size": "1 kb"},
    "full-every-2": {"bucket": "2", "full-compaction.delta-commits": "2"},
}


def _changes(options: dict[str, str], stream: bool, script: list[Any]) -> tuple[Any, ...]:
    """Per snapshot with changes, per key, its changes in read order; the table's rows at the end;
    and the commit that conflicted, if one did (a stream writer's base a dedicated compaction
    changed: its next commit conflicts, whichever path made the changelog)."""
    warehouse = tempfile.mkdtemp(prefix="first-row-changelog-")
    try:
        clear_caches()
        table = _table(warehouse, {"ignore-delete": "true", **options})
        conflict = None
        if stream:
            wb = table.new_stream_write_builder()
            write, committer = wb.new_write(), wb.new_commit()
            for i, (commit_batches, compact) in enumerate(script):
                for rows in commit_batches:
                    write.write_arrow(_batch(rows))
                try:
                    committer.commit(write.prepare_commit(i), i)
                except CommitConflictError:
                    conflict = i
                    break
                if compact is not None:
                    table.compact(full=compact)
            write.close()
        else:
            for commit_batches, compact in script:
                _commit(table, commit_batches)
                if compact is not None:
                    table.compact(full=compact)
        changes = table.changes(0)
        per: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for sid, kind, k, v in zip(*(changes.column(c).to_pylist() for c in ("_snapshot_id", "_row_kind", "id", "v")),
                                   strict=True):
            per[sid][k].append((kind, v))
        t = read(table)
        return conflict, [dict(per[s]) for s in sorted(per)], dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(),
                                                             strict=True))
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
        clear_caches()


@pytest.mark.parametrize("mode", list(MODES))
def test_the_compaction_changelog_is_the_flush_lookups(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    init = BucketWriter.__init__

    def old_path(self: BucketWriter, context: Any, *args: Any) -> None:
        init(self, dataclasses.replace(context, first_row_changelog=False), *args)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(script=scripts)
    def check(script: tuple[bool, list[Any]]) -> None:
        stream, commits = script
        derived = _changes(MODES[mode], stream, commits)
        with monkeypatch.context() as m:
            m.setattr(BucketWriter, "__init__", old_path)
            looked_up = _changes(MODES[mode], stream, commits)
        assert derived == looked_up
        # Each key's first row once, as +I, and the table holds exactly those rows.
        _, changes, rows = derived
        inserted = {k: v for per in changes for k, kinds in per.items() for kind, v in kinds if kind == "+I"}
        assert inserted == rows
        assert all(kind == "+I" for per in changes for kinds in per.values() for kind, _ in kinds)

    check()


@pytest.mark.parametrize("first_row_changelog", [True, False], ids=["compaction-changelog", "flush-lookup"])
def test_a_stream_writer_whose_compaction_lost_writes_on(first_row_changelog: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    init = BucketWriter.__init__

    def path(self: BucketWriter, context: Any, *args: Any) -> None:
        init(self, dataclasses.replace(context, first_row_changelog=first_row_changelog), *args)

    monkeypatch.setattr(BucketWriter, "__init__", path)
    script = [([[(0, 0, "+I")]], None), ([[(k, 0, "+I") for k in (0, 2, 3, 4, 5)]], False),
              ([[(1, 0, "+I")]], None), ([[(0, 0, "+I")]], None)]
    conflict, changes, rows = _changes(MODES["compacting"], True, script)
    # (Found by the property test above: the writer kept the lost compaction's deleted outputs in
    # its levels and its next flush lookup read one.) It takes its levels from the table again.
    assert conflict is None
    assert rows == {k: 0 for k in range(6)}
    assert sorted(k for per in changes for k in per) == list(range(6))
