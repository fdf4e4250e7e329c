"""The table's public calls that the pipelines use: bucket_mode, preview_buckets, index_stats,
files_added, committed_snapshots and compact_postpone (lakehouse_engine/stats.py, table.py)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from lakehouse_engine import POSTPONE_BUCKET, BucketMode, Catalog, FileStoreTable, UnsupportedError
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False), pa.field("v", pa.int64())])


def _rows(ids: range, dts: tuple[str, ...] = ("d1", "d2")) -> pa.Table:
    n = len(ids)
    return pa.table({"id": list(ids), "dt": [dts[i % len(dts)] for i in range(n)],
                     "v": list(ids)}, schema=SCHEMA)


def _table(catalog: Catalog, name: str, bucket: int, **options: object) -> FileStoreTable:
    return create_table(catalog, name, SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": bucket, **options})


def _preview_counts(table: FileStoreTable, data: pa.Table) -> Counter[tuple[str, int]]:
    buckets = table.preview_buckets(data).to_pylist()
    return Counter((f"dt={dt}", b) for dt, b in zip(data.column("dt").to_pylist(), buckets, strict=True))


def _written_counts(table: FileStoreTable, ids: list[int]) -> Counter[tuple[str, int]]:
    added = table.files_added(ids).to_pylist()
    counts: Counter[tuple[str, int]] = Counter()
    for f in added:
        counts[(f["partition"], f["bucket"])] += f["row_count"]
    return counts


def test_bucket_mode_of_each_kind_of_table(catalog: Catalog) -> None:
    assert _table(catalog, "fixed", 4).bucket_mode() is BucketMode.FIXED
    assert _table(catalog, "dynamic", -1).bucket_mode() is BucketMode.DYNAMIC
    assert _table(catalog, "postpone", -2).bucket_mode() is BucketMode.POSTPONE
    append = create_table(catalog, "append", SCHEMA, options={"bucket": -1})
    assert append.bucket_mode() is BucketMode.UNAWARE


@pytest.mark.parametrize(("bucket", "options"), [(4, {}), (-1, {"dynamic-bucket.target-row-num": 7})])
def test_preview_buckets_is_where_the_write_puts_each_row(catalog: Catalog, bucket: int,
                                                          options: dict[str, object]) -> None:
    table = _table(catalog, "t", bucket, **options)
    first = _rows(range(0, 40))
    write(table, first)
    # New and existing keys: the preview must match the second write, not a fresh table's.
    second = _rows(range(20, 70))
    preview = _preview_counts(table, second)
    assert table.latest_snapshot().id == 1          # type: ignore[union-attr]  # nothing written
    ids = write(table, second)
    assert preview == _written_counts(table, ids)
    assert len({b for _, b in preview}) > 1


def test_preview_of_a_postpone_table_is_the_postpone_bucket(catalog: Catalog) -> None:
    table = _table(catalog, "p", -2)
    assert set(table.preview_buckets(_rows(range(5))).to_pylist()) == {POSTPONE_BUCKET}


def test_preview_of_rows_without_the_table_columns_names_them(catalog: Catalog) -> None:
    table = _table(catalog, "t", 2)
    with pytest.raises(Exception, match="v"):
        table.preview_buckets(_rows(range(3)).drop(["v"]))


def test_preview_of_a_cross_partition_table_is_refused(catalog: Catalog) -> None:
    table = create_table(catalog, "cross", SCHEMA, primary_keys=["id"], partition_keys=["dt"],
                         options={"bucket": -1})
    with pytest.raises(UnsupportedError, match="cross-partition"):
        table.preview_buckets(_rows(range(3)))


def test_index_stats_count_the_keys_of_each_dynamic_bucket(catalog: Catalog) -> None:
    table = _table(catalog, "dyn", -1, **{"dynamic-bucket.target-row-num": 5})
    write(table, _rows(range(30)))
    write(table, _rows(range(10, 40)))              # 10 new keys, 20 updates
    stats = table.index_stats()
    assert set(stats.column("index_type").to_pylist()) == {"HASH"}
    per_partition = Counter()
    for r in stats.to_pylist():
        per_partition[r["partition"]] += r["row_count"]
        assert r["row_count"] <= 5
    assert per_partition == {"dt=d1": 20, "dt=d2": 20}
    assert _table(catalog, "fixed", 2).index_stats().num_rows == 0


def test_files_added_are_the_snapshots_new_files(catalog: Catalog) -> None:
    table = _table(catalog, "t", 2)
    [first] = write(table, _rows(range(10)))
    [second] = write(table, _rows(range(3), dts=("d1",)))
    both = table.files_added([first, second])
    assert both.column_names == ["snapshot_id", "partition", "bucket", "file_name", "level",
                                 "row_count", "file_size"]
    assert sum(both.filter(pa.compute.equal(both["snapshot_id"], first))["row_count"].to_pylist()) == 10
    assert set(table.files_added([second])["partition"].to_pylist()) == {"dt=d1"}


def test_committed_snapshots_tell_whether_a_commit_landed(catalog: Catalog) -> None:
    table = _table(catalog, "t", 2, **{"full-compaction.delta-commits": 1})
    wb = table.new_batch_write_builder().with_commit_user("job-7")
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(range(4)))
    ids = c.commit(w.prepare_commit())
    w.close()
    c.close()
    assert len(ids) >= 1
    assert table.committed_snapshots("job-7") == sorted(ids)
    assert table.committed_snapshots("job-8") == []


def test_compact_postpone_moves_rows_out_of_bucket_postpone_only(catalog: Catalog) -> None:
    table = _table(catalog, "p", -2)
    write(table, _rows(range(12)))
    assert {b for b in table.bucket_stats().column("bucket").to_pylist()} == {POSTPONE_BUCKET}
    ids = table.compact_postpone()
    assert len(ids) == 1
    buckets = table.bucket_stats()
    assert POSTPONE_BUCKET not in buckets.column("bucket").to_pylist()
    assert sorted(read(table).column("id").to_pylist()) == list(range(12))
