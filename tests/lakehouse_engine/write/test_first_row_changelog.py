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
from lakehouse_engine.errors import DataFileMissingError
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
    and the commit that conflicted, if one did (both paths must agree; a stream writer takes its
    levels from the table again after the dedicated compactions between its commits)."""
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


# ---- the compaction at commit meets a missing file ---------------------------------------------
def _rows_of(keys: list[int], v: int) -> pa.Table:
    return _batch([(k, v, "+I") for k in keys])


def _first_row_writer_after_a_flush(warehouse: str) -> tuple[FileStoreTable, Any, Any]:
    """A first-row lookup table with two level-0 files of another (write-only) writer, and a stream
    writer whose run is flushed (its levels read) but not committed yet."""
    table = _table(warehouse, {"bucket": "1", "write-buffer-size": "1 kb"})
    other = table.copy({"write-only": "true"})
    _commit(other, [[(k, 0, "+I") for k in range(0, 50)]])
    _commit(other, [[(k, 0, "+I") for k in range(50, 100)]])
    wb = table.new_stream_write_builder()
    write, committer = wb.new_write(), wb.new_commit()
    write.write_arrow(_rows_of(list(range(90, 150)), 1))  # (over the buffer: flushed now)
    return table, write, committer


def test_a_first_row_compaction_whose_files_a_dedicated_compaction_replaced_compacts_the_latest(
        tmp_path: Any) -> None:
    """The dedicated compaction (and expiry) removes the files the writer's levels hold during its
    cycle: its compaction at commit takes its levels from the table again and gives the changelog
    of its new keys (before: the write failed with DataFileMissingError)."""
    table, write, committer = _first_row_writer_after_a_flush(str(tmp_path))
    table.compact(full=True)
    table.expire_snapshots(retain_max=1, retain_min=1)
    start = table.latest_snapshot().id
    committer.commit(write.prepare_commit(1), 1)
    write.close()
    rows = dict(zip(*(read(table).column(c).to_pylist() for c in ("id", "v")), strict=True))
    assert rows == {k: 0 if k < 100 else 1 for k in range(150)}
    changes = table.changes(start)
    assert changes.column("_row_kind").to_pylist() == ["+I"] * 50
    assert sorted(changes.column("id").to_pylist()) == list(range(100, 150))
    assert {e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot())} != {0}


def test_a_first_row_compaction_that_cannot_realign_safely_conflicts(tmp_path: Any) -> None:
    """Another writer's rows, numbered like the writer's own (both started from the same snapshot),
    reach the top level through the dedicated compaction: the writer's first-row compaction cannot
    tell its new keys by their numbers any more, so the write conflicts; written again, every row
    lands and each key gives its +I once."""
    table, write, _ = _first_row_writer_after_a_flush(str(tmp_path))
    _commit(table.copy({"write-only": "true"}), [[(k, 9, "+I") for k in range(200, 260)]])
    table.compact(full=True)
    table.expire_snapshots(retain_max=1, retain_min=1)
    start = table.latest_snapshot().id
    with pytest.raises(CommitConflictError, match="first-row changelog cannot tell its new keys apart"):
        write.prepare_commit(1)
    write.abort()
    assert table.latest_snapshot().id == start
    _commit(table, [[(k, 1, "+I") for k in range(90, 150)]])
    rows = dict(zip(*(read(table).column(c).to_pylist() for c in ("id", "v")), strict=True))
    assert rows == {**{k: 0 if k < 100 else 1 for k in range(150)}, **{k: 9 for k in range(200, 260)}}
    changes = table.changes(start)
    assert changes.column("_row_kind").to_pylist() == ["+I"] * 50
    assert sorted(changes.column("id").to_pylist()) == list(range(100, 150))


def test_a_first_row_compaction_that_meets_a_listed_file_missing_names_it(tmp_path: Any) -> None:
    """A file the latest snapshot still lists is missing from storage (damage): the compaction that
    must give the changelog cannot be skipped, and the error names the file; nothing is committed."""
    table, write, _ = _first_row_writer_after_a_flush(str(tmp_path))
    latest = table.latest_snapshot()
    listed = [e.file for e in table.store.manifest_io().live_entries(latest)]
    bucket_dir = table.store.path_factory.bucket_dir([], 0)
    table.store.file_io.delete_file(f"{bucket_dir}/{listed[0].file_name}")
    with pytest.raises(DataFileMissingError, match=f"{listed[0].file_name} is listed in the latest snapshot"):
        write.prepare_commit(1)
    write.abort()
    assert table.latest_snapshot().id == latest.id


def test_a_realigned_first_row_bucket_with_full_compaction_delta_commits_replays_to_the_table(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`full-compaction.delta-commits` = 2: the writer's full compaction at commit 2 loses to a
    dedicated one; in the cycle of commit 4 a dedicated compaction replaces the files its levels
    hold and expiry removes them. Its levels are taken from the table again (at the next cycle,
    and when its full compaction at commit 4 meets a removed file), and the changes of its new keys
    come from there: each key's +I once, replaying to the table. (The other writer's keys, and the
    keys of each commit, are disjoint from the writer's older ones: a dedicated compaction between
    a flush and its commit makes a commit of keys it rewrote conflict, as a stale lookup.)"""
    taken: list[int] = []
    take = BucketWriter._take_levels

    def spied(self: BucketWriter, live: Any, snapshot: int) -> None:
        taken.append(snapshot)
        take(self, live, snapshot)

    monkeypatch.setattr(BucketWriter, "_take_levels", spied)
    table = _table(str(tmp_path), {"bucket": "1", "write-buffer-size": "1 kb", "full-compaction.delta-commits": "2"})
    other = table.copy({"write-only": "true"})
    wb = table.new_stream_write_builder()
    write, committer = wb.new_write(), wb.new_commit()
    expected: dict[int, int] = {}

    def put(keys: range, v: int) -> None:
        write.write_arrow(_rows_of(list(keys), v))  # (over the buffer: flushed now)
        for k in keys:
            expected.setdefault(k, v)

    def put_other(keys: range, v: int) -> None:
        _commit(other, [[(k, v, "+I") for k in keys]])
        for k in keys:
            expected.setdefault(k, v)

    put(range(0, 60), 1)
    committer.commit(write.prepare_commit(1), 1)
    put_other(range(200, 260), 9)
    put(range(100, 160), 2)
    put(range(130, 190), 3)  # (the first row of 130..159 is the one before)
    messages = write.prepare_commit(2)  # its full compaction ...
    assert any(m.compact_before for m in messages)
    table.compact(full=True)  # ... loses to this one
    committer.commit(messages, 2)
    put(range(300, 360), 4)
    committer.commit(write.prepare_commit(3), 3)
    assert taken  # (the lost compaction's outputs, out of its levels at commit 3's flush)
    put_other(range(500, 560), 9)  # (before the cycle's flush: the writer's rows number above it)
    put(range(400, 460), 5)
    table.compact(full=True)  # mid-cycle: replaces the files the writer's levels hold ...
    table.expire_snapshots(retain_max=1, retain_min=1)  # ... and removes them
    start, before = table.latest_snapshot().id, len(taken)
    committer.commit(write.prepare_commit(4), 4)
    write.close()
    assert len(taken) == before + 1  # (its full compaction at commit 4 met a removed file)
    rows = dict(zip(*(read(table).column(c).to_pylist() for c in ("id", "v")), strict=True))
    assert rows == expected
    assert {e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot())} == {
        table.store.schema.core_options.num_levels - 1}  # (fully compacted)
    changes = table.changes(start)
    assert set(changes.column("_row_kind").to_pylist()) == {"+I"}
    assert sorted(changes.column("id").to_pylist()) == list(range(400, 460))  # each new key once
    assert set(changes.column("v").to_pylist()) == {5}
