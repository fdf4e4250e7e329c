"""Range-by-range merging on real tables: a read and a compaction with a tiny
`sort-spill-buffer-size` (many ranges, batches cut inside row groups) return what a merge of the
whole section returns, for every data file format, for files of older schema versions and for
thin files without `_KEY_` columns; and a compaction's rolling writer records its files exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.mergetree.rolling_writer import RollingRunWriter
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.threads import prefetch
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.int64())])
TINY = {"sort-spill-buffer-size": "1"}  # every batch at its floor: hundreds of ranges
HUGE = {"sort-spill-buffer-size": "1 gb"}  # one range per section: the whole-section merge


def _batch(ids: np.ndarray, tag: int) -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i % 97}-{tag}" for i in ids],
                     "v": np.full(len(ids), tag, dtype=np.int64)}, schema=SCHEMA)


def _overlapping(table: FileStoreTable, runs: int = 4, rows: int = 3000, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    for i in range(runs):
        write(table, _batch(np.sort(rng.choice(4 * rows, size=rows, replace=False)), i))


def _sections(table: FileStoreTable) -> int:
    return max(len(s) for split in table.new_read_builder().new_scan().plan().splits() for s in split.sections)


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "first-row"])
def test_a_tiny_budget_reads_and_compacts_what_a_whole_section_merge_gives(
        catalog: Catalog, fmt: str, engine: str) -> None:
    table = create_table(catalog, f"t_{fmt}_{engine.replace('-', '_')}", SCHEMA, primary_keys=["id"],
                         options={"bucket": 1, "write-only": "true", "file.format": fmt,
                                  "merge-engine": engine})
    _overlapping(table)
    assert _sections(table) == 4
    whole = read(table.copy(HUGE)).sort_by("id")
    assert read(table.copy(TINY)).equals(read(table.copy(TINY)).sort_by("id"))  # ranges in key order
    assert read(table.copy(TINY)).equals(whole)
    table.copy(TINY).compact(full=True)
    assert read(table.copy(HUGE)).sort_by("id").equals(whole)


def test_files_of_an_older_schema_merge_range_by_range(catalog: Catalog) -> None:
    table = create_table(catalog, "evolved", SCHEMA, primary_keys=["id"],
                         options={"bucket": 1, "write-only": "true"})
    _overlapping(table, runs=2)
    from lakehouse_engine.schema_change import SchemaChange

    catalog.alter_table("db.evolved", [SchemaChange.add_column("extra", pa.int32()),
                                       SchemaChange.rename_column("name", "label")])
    table = catalog.get_table("db.evolved")
    rng = np.random.default_rng(9)
    ids = np.sort(rng.choice(12000, size=3000, replace=False))
    write(table, pa.table({"id": ids, "label": ["x"] * len(ids), "v": np.full(len(ids), 7),
                           "extra": pa.array(np.arange(len(ids)), pa.int32())}))
    whole = read(table.copy(HUGE)).sort_by("id")
    assert read(table.copy(TINY)).equals(whole)
    table.copy(TINY).compact(full=True)
    assert read(table).sort_by("id").equals(whole)


def test_thin_files_without_key_columns_merge_range_by_range(catalog: Catalog, monkeypatch: Any) -> None:
    # Paimon's `data-file.thin-mode` writes no `_KEY_` columns; the merge reads the key fields.
    original = pq.ParquetWriter.write_table
    table = create_table(catalog, "thin", SCHEMA, primary_keys=["id"], options={"bucket": 1, "write-only": "true"})
    # Written files lose their `_KEY_` columns; the manifest entries are computed as before.
    monkeypatch.setattr(DataFileWriter, "parquet_writer",
                        lambda self, sink, t, *_: pq.ParquetWriter(sink, _thin(t).schema, compression="zstd"))
    monkeypatch.setattr(pq.ParquetWriter, "write_table",
                        lambda self, t, *a, **k: original(self, _thin(t), *a, **k))
    _overlapping(table)
    monkeypatch.undo()
    files = [e.file for e in table.store.manifest_io().live_entries(table.latest_snapshot())]
    bucket_dir = table.path_factory.bucket_dir([], 0)
    assert all(not any(n.startswith(KEY_FIELD_PREFIX) for n in pq.read_schema(f"{bucket_dir}/{f.file_name}").names)
               for f in files)
    whole = read(table.copy(HUGE)).sort_by("id")
    assert read(table.copy(TINY)).equals(whole)


def _thin(t: pa.Table) -> pa.Table:
    return t.drop_columns([n for n in t.column_names if n.startswith(KEY_FIELD_PREFIX)])


def test_the_rolling_writer_records_each_file_as_a_whole_file_write_would(catalog: Catalog) -> None:
    table = create_table(catalog, "rolling", SCHEMA, primary_keys=["id"], options={"bucket": 1})
    ids = np.arange(0, 60_000, 3)
    rows = _batch(ids, 1)
    kinds = np.zeros(len(ids), dtype=np.int8)
    kinds[::7] = 3  # some deletes
    rows = rows.append_column(SEQUENCE_NUMBER, pa.array(np.arange(len(ids)) * 2 + 5)).append_column(
        VALUE_KIND, pa.array(kinds))
    bucket_dir = table.path_factory.bucket_dir([], 0)
    writer = DataFileWriter(table.file_io, table.schema, bucket_dir, table.path_factory.new_data_file_name,
                            target_file_size=16 * 1024)
    rolling = RollingRunWriter(writer, level=3, file_source=1)
    for start in range(0, len(ids), 1700):  # ranges that do not line up with files
        rolling.write(rows.slice(start, 1700))
    metas = rolling.finish()
    assert len(metas) > 2
    assert sum(m.row_count for m in metas) == len(ids)
    offset = 0
    for m in metas:
        in_file = pq.read_table(f"{bucket_dir}/{m.file_name}")
        assert in_file.num_rows == m.row_count
        expected = writer.file_meta(m.file_name, m.file_size, in_file, 3, None, 1)
        for field in ("row_count", "min_key", "max_key", "key_stats", "min_sequence_number",
                      "max_sequence_number", "delete_row_count", "level", "file_source", "file_size"):
            assert getattr(m, field) == getattr(expected, field), field
        assert in_file.column("id").to_pylist() == ids[offset:offset + m.row_count].tolist()
        offset += m.row_count


def test_a_failed_rolling_write_leaves_no_file(catalog: Catalog) -> None:
    table = create_table(catalog, "aborted", SCHEMA, primary_keys=["id"], options={"bucket": 1})
    bucket_dir = table.path_factory.bucket_dir([], 0)
    writer = DataFileWriter(table.file_io, table.schema, bucket_dir, table.path_factory.new_data_file_name,
                            target_file_size=16 * 1024)
    rolling = RollingRunWriter(writer, level=1, file_source=1)
    ids = np.arange(20_000)
    rows = _batch(ids, 1).append_column(SEQUENCE_NUMBER, pa.array(ids)).append_column(
        VALUE_KIND, pa.array(np.zeros(len(ids), np.int8)))
    rolling.write(rows)
    assert rolling.written
    rolling.abort()
    assert not list(Path(bucket_dir).glob("data-*"))


def test_prefetch_yields_in_order_raises_the_producers_error_and_stops_early() -> None:
    assert list(prefetch(iter(range(50)))) == list(range(50))

    def failing() -> Any:
        yield 1
        raise ValueError("boom")

    got = []
    with pytest.raises(ValueError, match="boom"):
        for x in prefetch(failing()):
            got.append(x)
    assert got == [1]
    closed = []

    def endless() -> Any:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.append(True)

    stream = prefetch(endless())
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert closed == [True]
