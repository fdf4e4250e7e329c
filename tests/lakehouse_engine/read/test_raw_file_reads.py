"""Reads of files as they are (a deletion-vector table's, Paimon's raw-convertible splits).

Specification: every file of such a split is its own unit of parallel work, and the read returns
the same rows in the same order whatever the threads; only the value columns are decoded, with
`_VALUE_KIND` only for a file that may hold retractions; a file's deletion vector and its
retractions are applied in one place (`TableRead._live_batches`), one mask per batch.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT
from lakehouse_engine.mergetree.evolution import EvolvingFileReader
from lakehouse_engine.read import table_read
from lakehouse_engine.read.deletion_vectors import DeletionVectorReader
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.read.table_read import TableRead, may_hold_retractions
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.int64()), ("kind", pa.string())])
DV = {"deletion-vectors.enabled": "true", "rowkind.field": "kind", "bucket": "1"}


def _batch(ids: list[int], tag: str, kind: str = "+I") -> pa.Table:
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids], "n": [i % 7 for i in ids],
                     "kind": [kind] * len(ids)}, schema=SCHEMA)


def _splits(t: FileStoreTable) -> list[DataSplit]:
    return t.new_read_builder().new_scan().plan().splits()


def _dv_table_of_three_files(catalog: Catalog) -> FileStoreTable:
    """One bucket, one split, three files above level 0 (two with vectors)."""
    t = create_table(catalog, "t", SCHEMA, ["id"], options=DV)
    write(t, _batch(list(range(0, 300)), "a"))
    write(t, _batch(list(range(300, 600)), "b"))
    write(t, _batch(list(range(0, 600, 3)), "c"))  # replaces rows of both older files
    (split,) = _splits(t)
    assert len(split.sections) == 3 and all(len(s) == 1 for s in split.sections)
    assert sum(d is not None for d in split.data_deletion_files or []) == 2
    return t


def test_the_files_of_one_raw_split_are_read_on_parallel_threads_in_split_order(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _dv_table_of_three_files(catalog)
    splits = _splits(t)
    serial = t.new_read_builder().new_read().to_arrow(splits, parallelism=1)
    # Two files must be read at once: each of the first two reads waits for the other.
    meet = threading.Barrier(2, timeout=20)
    started = []
    live_batches = TableRead._live_batches

    def waiting(self: TableRead, *args: Any, **kwargs: Any) -> Iterator[pa.Table]:
        started.append(threading.get_ident())
        if len(started) <= 2:
            meet.wait()
        yield from live_batches(self, *args, **kwargs)

    monkeypatch.setattr(TableRead, "_live_batches", waiting)
    parallel = t.new_read_builder().new_read().to_arrow(splits, parallelism=3)
    assert len(set(started)) >= 2
    assert parallel.equals(serial)  # the same rows in the same order
    expected = {i: ("c" if i % 3 == 0 else "a" if i < 300 else "b") + str(i) for i in range(600)}
    assert {r["id"]: r["v"] for r in parallel.to_pylist()} == expected
    assert parallel.num_rows == 600


def test_a_parallel_read_keeps_the_order_of_a_serial_one_across_splits(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "3"})
    for step in range(4):
        write(t, _batch(list(range(step * 40, step * 40 + 100)), f"s{step}"))
    splits = _splits(t)
    read_ = t.new_read_builder().new_read()
    serial = read_.to_arrow(splits, parallelism=1)
    assert read_.to_arrow(splits, parallelism=2).equals(serial)
    assert read_.to_arrow(splits, parallelism=8).equals(serial)
    batches = pa.Table.from_batches(list(read_.to_arrow_batch_reader(splits)))
    assert batches.equals(serial)
    assert sorted(serial.column("id").to_pylist()) == list(range(220))


def _columns_read(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """data file name -> the columns a read decodes of it."""
    seen: dict[str, list[str]] = {}
    read_batches = EvolvingFileReader.read_batches

    def spy(self: EvolvingFileReader, path: str, columns: Any, *args: Any, **kwargs: Any) -> Any:
        seen[path.rsplit("/", 1)[-1]] = list(columns)
        return read_batches(self, path, columns, *args, **kwargs)

    monkeypatch.setattr(EvolvingFileReader, "read_batches", spy)
    return seen


def test_a_dv_read_decodes_value_columns_and_the_row_kind_only_of_files_that_may_retract(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options=DV)
    write(t, _batch(list(range(100)), "a"))
    write(t, _batch(list(range(0, 100, 2)), "b"))
    t.compact(full=True)  # a compaction's file: no retraction, and it counted them
    write(t, _batch(list(range(0, 100, 5)), "c"))  # a lone new file moves up as it was written
    (split,) = _splits(t)
    by_source = {f.file_source: f for f in split.files}
    compacted, moved = by_source[FILE_SOURCE_COMPACT], by_source[FILE_SOURCE_APPEND]
    assert compacted.delete_row_count == moved.delete_row_count == 0
    assert split.deletion_file(compacted.file_name) is not None
    seen = _columns_read(monkeypatch)
    got = read(t)
    values = t.schema.field_names
    assert seen[compacted.file_name] == values
    assert seen[moved.file_name] == values + [VALUE_KIND]
    assert not [c for cols in seen.values() for c in cols
                if c.startswith(KEY_FIELD_PREFIX) or c == SEQUENCE_NUMBER]
    assert {r["id"]: r["v"] for r in got.to_pylist()} == {
        i: ("c" if i % 5 == 0 else "b" if i % 2 == 0 else "a") + str(i) for i in range(100)}


@pytest.mark.parametrize(("count", "source", "may"), [
    (0, FILE_SOURCE_COMPACT, False),
    (0, FILE_SOURCE_APPEND, True),   # pypaimon 2.1.0 records 0 for files holding retractions
    (0, None, True),
    (None, FILE_SOURCE_COMPACT, True),  # writers before Paimon 0.8 record no count
    (3, FILE_SOURCE_COMPACT, True),
])
def test_which_files_may_hold_retractions(catalog: Catalog, count: int | None, source: int | None,
                                          may: bool) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options=DV)
    write(t, _batch([1], "a"))
    (f,) = _splits(t)[0].files
    assert may_hold_retractions(dataclasses.replace(f, delete_row_count=count, file_source=source)) is may


def test_a_file_recording_no_retraction_that_holds_one_still_drops_it(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={"rowkind.field": "kind", "bucket": "1"})
    write(t, _batch([1, 2, 3], "a"))
    write(t, pa.concat_tables([_batch([10], "b"), _batch([11], "b", "-D")]))  # keys of its own
    (split,) = _splits(t)
    assert [len(s) for s in split.sections] == [1, 1]
    # As pypaimon 2.1.0 writes it: `_DELETE_ROW_COUNT` 0 although the file holds a `-D`.
    zero = [[dataclasses.replace(f, delete_row_count=0) for f in s] for s in split.sections]
    as_pypaimon = dataclasses.replace(split, sections=zero, raw_convertible=True)
    for parallelism in (1, 2):
        got = t.new_read_builder().new_read().to_arrow([as_pypaimon], parallelism=parallelism)
        assert got.column("id").to_pylist() == [1, 2, 3, 10]


def test_deletion_vectors_are_applied_in_one_place(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _dv_table_of_three_files(catalog)
    callers = []
    keep_mask = DeletionVectorReader.keep_mask

    def spy(self: DeletionVectorReader, *args: Any) -> Any:
        callers.append(inspect.stack()[1].function)
        return keep_mask(self, *args)

    monkeypatch.setattr(DeletionVectorReader, "keep_mask", spy)
    splits = _splits(t)
    read_ = t.new_read_builder().new_read()
    expected = read_.to_arrow(splits, parallelism=1)
    assert read_.to_arrow(splits, parallelism=2).equals(expected)
    assert pa.Table.from_batches(list(read_.to_arrow_batch_reader(splits))).equals(expected)
    assert expected.num_rows == 600
    assert callers and set(callers) == {"_live_batches"}
    assert not hasattr(TableRead, "_read_live_rows")


def test_a_parallel_read_starts_with_its_largest_files_and_keeps_split_order(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "2"})
    write(t, _batch(list(range(2000)), "a"))       # one large file per bucket
    write(t, _batch(list(range(0, 2000, 50)), "b"))  # a small one beside it, marking rows of the large
    splits = _splits(t)
    sizes = {f.file_name: f.file_size for s in splits for f in s.files}
    assert len(sizes) == 4 and all(len(s.sections) == 2 for s in splits)
    lock = threading.Lock()
    started: list[str] = []
    read_unit = TableRead._read_unit

    def spy(self: TableRead, unit: tuple[DataSplit, int | None]) -> pa.Table:
        split, section = unit
        assert section is not None
        with lock:
            started.append(split.sections[section][0].file_name)
        return read_unit(self, unit)

    monkeypatch.setattr(TableRead, "_read_unit", spy)
    read_ = t.new_read_builder().new_read()
    parallel = read_.to_arrow(splits, parallelism=2)
    # The two largest files are the first two taken off the queue (the threads take them in turn).
    largest = sorted(sizes, key=lambda n: -sizes[n])
    assert set(started[:2]) == set(largest[:2])
    assert sorted(started) == sorted(sizes)
    monkeypatch.setattr(TableRead, "_read_unit", read_unit)
    assert parallel.equals(read_.to_arrow(splits, parallelism=1))  # rows in split order
    assert parallel.num_rows == 2000


def test_a_lazy_read_of_raw_splits_decodes_files_on_parallel_threads_in_split_order(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "2", "read.parallelism": "2"})
    write(t, _batch(list(range(0, 400)), "a"))
    write(t, _batch(list(range(0, 400, 3)), "b"))  # marks rows of the older files
    splits = _splits(t)
    serial = t.new_read_builder().new_read().to_arrow(splits, parallelism=1)
    # The first two files must be decoded at once: each of their reads waits for the other.
    meet = threading.Barrier(2, timeout=20)
    started: list[int] = []
    live_batches = TableRead._live_batches

    def waiting(self: TableRead, *args: Any, **kwargs: Any) -> Iterator[pa.Table]:
        started.append(threading.get_ident())
        if len(started) <= 2:
            meet.wait()
        yield from live_batches(self, *args, **kwargs)

    monkeypatch.setattr(TableRead, "_live_batches", waiting)
    lazy = pa.Table.from_batches(list(t.new_read_builder().new_read().to_arrow_batch_reader(splits)))
    assert len(set(started)) >= 2 and len(started) == sum(len(s.files) for s in splits)
    assert lazy.equals(serial)  # the same rows in the same order
    assert {r["id"]: r["v"] for r in lazy.to_pylist()} == {
        i: ("b" if i % 3 == 0 else "a") + str(i) for i in range(400)}


def test_a_lazy_read_of_raw_splits_holds_about_the_merge_budget(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 1 << 20
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        **DV, "bucket": "2", "read.parallelism": "2", "sort-spill-buffer-size": str(budget)})
    write(t, _batch(list(range(0, 400)), "a"))
    write(t, _batch(list(range(0, 400, 3)), "b"))
    asked: list[int] = []
    live_batches = TableRead._live_batches

    def spy(self: TableRead, split: DataSplit, meta: Any, columns: list[str], batch_bytes: int,
            drop_retractions: bool = False) -> Iterator[pa.Table]:
        asked.append(batch_bytes)
        return live_batches(self, split, meta, columns, batch_bytes, drop_retractions)

    monkeypatch.setattr(TableRead, "_live_batches", spy)
    lazy = pa.Table.from_batches(list(t.new_read_builder().new_read().to_arrow_batch_reader(_splits(t))))
    # Two threads, each with one batch queued and one being decoded: a quarter of the budget each.
    assert asked == [budget // 4] * 4
    assert sorted(lazy.column("id").to_pylist()) == list(range(400))


def test_a_lazy_read_that_must_merge_reads_one_split_at_a_time(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "read.parallelism": "2"})
    write(t, _batch(list(range(0, 100)), "a"))
    write(t, _batch(list(range(0, 100, 2)), "b"))  # overlaps the first file: one merged section
    (split,) = _splits(t)
    assert [len(s) for s in split.sections] == [2]
    streamed: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Iterator[pa.Table]:
        streamed.append(args)
        return iter(())

    monkeypatch.setattr(table_read, "ordered_streams", spy)
    lazy = pa.Table.from_batches(list(t.new_read_builder().new_read().to_arrow_batch_reader([split])))
    assert {r["id"]: r["v"] for r in lazy.to_pylist()} == {
        i: ("b" if i % 2 == 0 else "a") + str(i) for i in range(100)}
    assert not streamed  # merged key range by key range, no file read as it is


def test_a_lazy_read_of_raw_splits_applies_projection_predicate_and_limit_as_a_whole_read(
        catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "2", "read.parallelism": "2"})
    write(t, _batch(list(range(0, 400)), "a"))
    write(t, _batch(list(range(0, 400, 3)), "b"))
    rb = t.new_read_builder()
    pb = rb.new_predicate_builder()
    rb = rb.with_projection(["v", "id"]).with_filter(pb.between("n", 2, 4))
    splits = rb.new_scan().plan().splits()
    whole = rb.new_read().to_arrow(splits, parallelism=1)
    lazy = pa.Table.from_batches(list(rb.new_read().to_arrow_batch_reader(splits)), schema=whole.schema)
    assert lazy.equals(whole)
    assert whole.column_names == ["v", "id"] and whole.num_rows == sum(1 for i in range(400) if 2 <= i % 7 <= 4)
    limited = t.new_read_builder().with_limit(10)
    reader = limited.new_read().to_arrow_batch_reader(limited.new_scan().plan().splits())
    assert sum(b.num_rows for b in reader) == 10
