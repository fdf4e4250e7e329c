"""Postpone buckets and rescale: rows hidden until compacted, bucket counts per partition."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CommitConflictError, LakehouseError
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])


def batch(ids: list[int] | np.ndarray, dts: list[str] | str, v: int) -> pa.Table:
    ids = list(np.asarray(ids).tolist())
    dts = dts if isinstance(dts, list) else [dts] * len(ids)
    return pa.table({"id": ids, "dt": dts, "v": [v] * len(ids)}, schema=SCHEMA)


def buckets_by_partition(table) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for r in table.bucket_stats().to_pylist():
        out.setdefault(r["partition"], set()).add(r["total_buckets"])
    return out


def assert_keys_in_their_hash_bucket(table) -> None:
    rb = table.new_read_builder()
    types = table.schema.types_of(["id"])
    for split in rb.new_scan().plan().splits():
        data = rb.new_read().read_split(split)
        expected = bucket_of(hash_rows([data.column("id")], types), split.total_buckets)
        assert (expected == split.bucket).all()


def test_postponed_rows_are_invisible_until_compaction(catalog: Catalog) -> None:
    table = create_table(catalog, "p", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "-2"})
    write(table, batch([1, 2, 3, 1], ["a", "a", "b", "a"], 0))
    write(table, batch([1], "a", 5))
    assert read(table).num_rows == 0
    stats = table.bucket_stats()
    assert set(stats.column("bucket").to_pylist()) == {-2} and sum(stats.column("record_count").to_pylist()) == 4
    assert table.compact()
    assert rows(read(table), "id") == [{"id": 1, "dt": "a", "v": 5}, {"id": 2, "dt": "a", "v": 0},
                                       {"id": 3, "dt": "b", "v": 0}]
    assert -2 not in table.bucket_stats().column("bucket").to_pylist()
    assert buckets_by_partition(table) == {"dt=a": {1}, "dt=b": {1}}  # postpone.default-bucket-num


def test_partitions_keep_their_own_bucket_counts(catalog: Catalog) -> None:
    table = create_table(catalog, "p", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "-2", "postpone.default-bucket-num": "2"})
    write(table, batch(range(40), "a", 0))
    table.compact()
    table.rescale(5, [{"dt": "a"}])
    assert catalog.get_table("db.p").schema.options["bucket"] == "-2"  # one partition: option kept
    write(table, batch(range(30, 60), "a", 1))
    write(table, batch(range(10), "b", 1))
    table.compact()
    assert buckets_by_partition(table) == {"dt=a": {5}, "dt=b": {2}}
    got = {(r["id"], r["dt"]): r["v"] for r in read(table).to_pylist()}
    assert len(got) == 70 and got[(35, "a")] == 1 and got[(5, "a")] == 0
    assert_keys_in_their_hash_bucket(table)


def test_rescale_two_seven_three_keeps_rows_and_later_writes_find_their_buckets(catalog: Catalog) -> None:
    table = create_table(catalog, "f", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "2"})
    write(table, batch(range(200), ["a"] * 100 + ["b"] * 100, 0))
    write(table, batch(range(0, 200, 7), ["a"] * 15 + ["b"] * 14, 1))
    expected = rows(read(table), "id", "dt")
    for n in (7, 3):
        (snapshot_id,) = table.rescale(n)
        assert table.snapshot(snapshot_id).commit_kind == "OVERWRITE"
        assert rows(read(table), "id", "dt") == expected
        assert buckets_by_partition(table) == {"dt=a": {n}, "dt=b": {n}}
        assert_keys_in_their_hash_bucket(table)
        # Other engines hash with the table option: a whole-table rescale changes it (new schema).
        assert catalog.get_table("db.f").schema.options["bucket"] == str(n)
    write(table, batch([1, 150, 999], ["a", "b", "a"], 2))
    assert_keys_in_their_hash_bucket(table)
    assert read(table).num_rows == 201


def test_a_writer_holding_the_old_bucket_count_gets_a_clear_error(catalog: Catalog) -> None:
    table = create_table(catalog, "f", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "2"})
    write(table, batch(range(10), "a", 0))
    stale = table.new_batch_write_builder()
    w = stale.new_write()
    w.write_arrow(batch([100], "a", 1))
    messages = w.prepare_commit()
    table.rescale(4)
    with pytest.raises(CommitConflictError, match="with 2 buckets, but it now has 4"):
        stale.new_commit().commit(messages)
    assert read(table).num_rows == 10


def test_rescale_rejects_bad_arguments(catalog: Catalog) -> None:
    fixed = create_table(catalog, "f", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "2"})
    with pytest.raises(LakehouseError, match="positive"):
        fixed.rescale(0)
    dynamic = create_table(catalog, "d", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "-1"})
    with pytest.raises(LakehouseError, match="only fixed-bucket and postpone-bucket"):
        dynamic.rescale(3)
