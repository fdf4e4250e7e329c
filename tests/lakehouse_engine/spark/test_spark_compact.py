"""Compaction on Spark: one task per (partition, bucket) with work (all, or the requested ones),
one COMPACT commit; postpone bucket tables move their postponed rows first."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.spark import compact as spark_compact
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, key_buckets, live_file_names, orders

pytestmark = pytest.mark.spark
table_compact = pytest.importorskip("lakehouse_engine.compact.table_compact")


def test_full_compaction_runs_one_task_per_bucket_and_commits_once(spark: Any, catalog: Catalog) -> None:
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 2})
    for start, tag in ((0, "v1"), (20, "v2"), (40, "v3")):
        engine_write(table, orders(60, start=start, tag=tag))
    before = rows(read(table), "id")
    buckets = key_buckets(table)
    planned = table_compact.plan_compaction(table.store, full=True, partitions=None)
    assert len(planned) == len(set(buckets.values())) == 6

    sc = spark.sparkContext
    sc.setJobGroup("compaction-test", "full compaction")
    try:
        ids = spark_compact(spark, table, full=True)
    finally:
        sc.setJobGroup("", "")
    tracker = sc.statusTracker()
    stages = [s for j in tracker.getJobIdsForGroup("compaction-test") for s in tracker.getJobInfo(j).stageIds]
    assert sum(tracker.getStageInfo(s).numTasks for s in stages) == len(planned)

    assert len(ids) == 1 and table.snapshot(ids[0]).commit_kind == "COMPACT"
    assert rows(read(table), "id") == before
    assert key_buckets(table) == buckets
    assert len(live_file_names(table)) == 6  # one sorted run of one file per bucket


def test_compaction_of_chosen_partitions_only(spark: Any, catalog: Catalog) -> None:
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 1})
    engine_write(table, orders(30))
    engine_write(table, orders(30, tag="v2"))
    ids = spark_compact(spark, "db.orders", full=True, partitions=[{"dt": "2026-11-21"}],
                        warehouse=catalog.warehouse)
    latest = table.latest_snapshot()
    assert latest is not None and ids == [latest.id]
    per_partition: dict[str, int] = {}
    for e in table.store.manifest_io().live_entries(latest):
        dt = table.store.partition_codec().from_binary(e.partition).values[0]
        per_partition[dt] = per_partition.get(dt, 0) + 1
    assert per_partition == {"2026-11-21": 1, "2026-11-22": 2, "2026-11-23": 2}
    assert spark_compact(spark, table, full=False) == []  # nothing left that the picker wants


def _files_per_bucket(table: FileStoreTable) -> dict[tuple[str, int], set[str]]:
    latest = table.latest_snapshot()
    assert latest is not None
    codec = table.store.partition_codec()
    out: dict[tuple[str, int], set[str]] = {}
    for e in table.store.manifest_io().live_entries(latest):
        out.setdefault((codec.from_binary(e.partition).values[0], e.bucket), set()).add(e.file.file_name)
    return out


def test_compaction_of_chosen_buckets_only(spark: Any, catalog: Catalog) -> None:
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 2})
    for tag in ("v1", "v2", "v3"):
        engine_write(table, orders(60, tag=tag))
    before = _files_per_bucket(table)
    assert len(before) == 6 and all(len(files) == 3 for files in before.values())
    contents = rows(read(table), "id")

    chosen = [({"dt": "2026-11-21"}, 0), ({"dt": "2026-11-23"}, 1), ({"dt": "2026-11-22"}, 7)]
    ids = spark_compact(spark, table, full=True, buckets=iter(chosen))
    after = _files_per_bucket(table)
    assert len(ids) == 1 and table.snapshot(ids[0]).commit_kind == "COMPACT"
    assert {k for k in before if after[k] != before[k]} == {("2026-11-21", 0), ("2026-11-23", 1)}
    assert len(after[("2026-11-21", 0)]) == len(after[("2026-11-23", 1)]) == 1
    assert rows(read(table), "id") == contents

    # With partitions too, a bucket must be in one of them; `{}` is every partition.
    ids = spark_compact(spark, table, full=True, partitions=[{"dt": "2026-11-22"}], buckets=[({}, 1)])
    assert {k for k, files in _files_per_bucket(table).items() if files != after[k]} == {("2026-11-22", 1)}
    assert spark_compact(spark, table, full=True, buckets=[]) == []
    with pytest.raises(LakehouseError, match="not partition keys"):
        spark_compact(spark, table, buckets=[({"id": 1}, 0)])


def test_postpone_table_moves_postponed_rows_then_compacts(spark: Any, catalog: Catalog) -> None:
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": -2, "postpone.default-bucket-num": 2})
    for tag in ("v1", "v2"):
        engine_write(table, orders(60, tag=tag))
    assert read(table).num_rows == 0

    # Bucket -2 is a partition's postpone bucket: only that partition's rows move.
    ids = spark_compact(spark, table, buckets=[({"dt": "2026-11-22"}, -2)])
    assert len(ids) == 1
    assert {r["dt"] for r in read(table).to_pylist()} == {"2026-11-22"}
    assert {k for k in _files_per_bucket(table)} == {
        ("2026-11-21", -2), ("2026-11-22", 0), ("2026-11-22", 1), ("2026-11-23", -2)}

    ids = spark_compact(spark, table, full=True)  # the rest moves, then every bucket is compacted
    assert [table.snapshot(i).commit_kind for i in ids] == ["COMPACT", "COMPACT"]
    assert rows(read(table), "id") == rows(orders(60, tag="v2"), "id")
    after = _files_per_bucket(table)
    assert sorted(after) == [(dt, b) for dt in ("2026-11-21", "2026-11-22", "2026-11-23") for b in (0, 1)]
    assert all(len(files) == 1 for files in after.values())
