"""Compaction on Spark: one task per (partition, bucket) with work, one COMPACT commit."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark import compact as spark_compact
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
    planned = table_compact.plan_compaction(table, full=True, partitions=None)
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
    for e in table.manifest_io().live_entries(latest):
        dt = table.partition_codec().from_binary(e.partition).values[0]
        per_partition[dt] = per_partition.get(dt, 0) + 1
    assert per_partition == {"2026-11-21": 1, "2026-11-22": 2, "2026-11-23": 2}
    assert spark_compact(spark, table, full=False) == []  # nothing left that the picker wants
