"""Bucket assignment per bucket mode, and how buckets are shown (tables, charts, numbers)."""

from __future__ import annotations

import math
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.spark.tables import TableRef
from pipelines.defs.lsm.assets import (
    UNDECIDED,
    assign_buckets,
    dynamic_bucket_counts,
    plan_is_exact,
    written_buckets,
)
from pipelines.lib.bucket_report import (
    BucketRow,
    bar_chart_markdown,
    bucket_metadata,
    buckets_markdown,
    buckets_over_trigger,
    by_bucket,
    changed_buckets,
    changes_markdown,
    skew,
)
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.staging import EVENT_SPARK_SCHEMA
from tests.pipelines.conftest import DAYS, events


def _row(bucket: int, records: int, runs: int = 1) -> BucketRow:
    return BucketRow("dt=2026-11-01", bucket, 2, records, runs, runs, records * 20)


def test_bucket_metadata_shows_rows_as_a_table_a_chart_and_numbers() -> None:
    meta = bucket_metadata([_row(0, 300, runs=3), _row(1, 100), _row(POSTPONE_BUCKET, 50)])
    table = meta["rows_per_bucket"]
    assert isinstance(table, dg.TableMetadataValue)  # a real table in the UI, not markdown text
    assert [c.name for c in table.schema.columns] == ["partition", "bucket", "rows", "files", "sorted_runs", "bytes"]
    assert [r.data for r in table.records] == [
        {"partition": "dt=2026-11-01", "bucket": "0", "rows": 300, "files": 3, "sorted_runs": 3, "bytes": 6000},
        {"partition": "dt=2026-11-01", "bucket": "1", "rows": 100, "files": 1, "sorted_runs": 1, "bytes": 2000},
        {"partition": "dt=2026-11-01", "bucket": "postpone", "rows": 50, "files": 1, "sorted_runs": 1,
         "bytes": 1000}]
    chart = meta["rows_per_bucket_chart"].value.splitlines()
    assert chart[2].startswith("dt=2026-11-01/0") and chart[2].count("█") == 24 and chart[2].endswith("300")
    assert chart[3].count("█") == 8
    assert (meta["buckets"], meta["max_rows_in_a_bucket"], meta["mean_rows_per_bucket"]) == (2, 300, 200.0)
    assert (meta["bucket_skew"], meta["max_sorted_runs"], meta["rows_in_postpone_bucket"]) == (1.5, 3, 50)


def test_empty_tables_have_something_to_say() -> None:
    assert buckets_markdown([]) == "The table has no data files yet."
    assert bar_chart_markdown([]) == "Nothing to chart."
    assert skew([]) == 0.0 and skew([0, 0]) == 0.0
    assert bucket_metadata([])["bucket_skew"] == 0.0


def test_buckets_over_the_trigger_are_strictly_above_it_and_never_postpone() -> None:
    rows = [_row(0, 1, runs=5), _row(1, 1, runs=6), _row(POSTPONE_BUCKET, 1, runs=9)]
    assert [r.bucket for r in buckets_over_trigger(rows, 5)] == [1]


def test_dynamic_preview_fills_buckets_up_to_the_target(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=-1,
                                  table_options={"dynamic-bucket.target-row-num": "50"})
    table = lakehouse.get_or_create_table()
    rows = events(rows_per_day=300)
    plan = dynamic_bucket_counts(TableRef.of(table), rows)
    keys = len(set(rows.column("order_id").to_pylist()))
    assert sum(plan.column("rows").to_pylist()) == rows.num_rows
    assert sorted(plan.column("bucket").to_pylist()) == list(range(math.ceil(keys / 50)))
    assert table.latest_snapshot() is None  # a preview writes nothing, index files included


@pytest.mark.spark
@pytest.mark.parametrize("bucket", [3, -1, -2])
def test_assign_buckets_on_spark_for_every_mode(tmp_path: Path, spark_resource: LakehouseSparkResource, bucket: int) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=bucket,
                                  table_options={"dynamic-bucket.target-row-num": "40"})
    table = lakehouse.get_or_create_table()
    rows = events(rows_per_day=150, days=2)
    plan = assign_buckets(spark_resource.spark_session.createDataFrame(rows, EVENT_SPARK_SCHEMA), table)
    per_day = pc.value_counts(rows.column("dt")).to_pylist()
    assert {dt: sum(n for d, _, n in plan if d == dt) for dt in DAYS} == {
        c["values"]: c["counts"] for c in per_day}
    if bucket == 3:
        hashes = hash_rows([rows.column("order_id")], table.schema.types_of(["order_id"]))
        expected = pa.table({"dt": rows.column("dt"), "b": bucket_of(hashes, 3)})
        counts = expected.group_by(["dt", "b"]).aggregate([("b", "count")])
        assert plan == sorted(zip(counts.column("dt").to_pylist(), counts.column("b").to_pylist(),
                                  counts.column("b_count").to_pylist(), strict=True))
    elif bucket == -1:
        assert max(b for _, b, _ in plan) >= 1
    else:
        assert {b for _, b, _ in plan} == {POSTPONE_BUCKET}


@pytest.mark.spark
def test_a_dynamic_write_with_several_assigners_gets_no_single_assigner_plan(
        tmp_path: Path, spark_resource: LakehouseSparkResource) -> None:
    """With n > 1 assigners each Spark task places its keys on its own: a one-assigner preview would
    name buckets the write does not use, so the plan leaves the buckets to the write."""
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=-1,
                                  table_options={"dynamic-bucket.target-row-num": "40"})
    table = lakehouse.get_or_create_table()
    rows = events(rows_per_day=150, days=2)
    assert not plan_is_exact(table)  # no assigner-parallelism: one assigner per Spark task
    plan = assign_buckets(spark_resource.spark_session.createDataFrame(rows, EVENT_SPARK_SCHEMA), table,
                          plan_is_exact(table))
    per_day = {c["values"]: c["counts"] for c in pc.value_counts(rows.column("dt")).to_pylist()}
    assert plan == [(dt, UNDECIDED, per_day[dt]) for dt in DAYS]


@pytest.mark.parametrize(("bucket", "options", "exact"), [
    (3, {}, True), (-2, {}, True), (-1, {}, False), (-1, {"dynamic-bucket.assigner-parallelism": "4"}, False),
    (-1, {"dynamic-bucket.assigner-parallelism": "1"}, True)])
def test_a_plan_is_exact_unless_several_dynamic_assigners_write(
        tmp_path: Path, bucket: int, options: dict[str, str], exact: bool) -> None:
    table = LakehouseResource(warehouse=str(tmp_path), bucket=bucket, table_options=options).get_or_create_table()
    assert plan_is_exact(table) is exact


def test_written_buckets_count_the_files_a_commit_added_and_mark_new_buckets() -> None:
    files = pa.table({"partition": ["dt=a", "dt=a", "dt=a", "dt=b"], "bucket": [0, 0, 1, POSTPONE_BUCKET],
                      "row_count": [10, 5, 7, 3]})
    assert written_buckets(files, existed={("dt=a", 0)}) == [
        {"partition": "dt=a", "bucket": "0", "files": 2, "records": 15, "new": False},
        {"partition": "dt=a", "bucket": "1", "files": 1, "records": 7, "new": True},
        {"partition": "dt=b", "bucket": "postpone", "files": 1, "records": 3, "new": False}]
    assert written_buckets(files.slice(0, 0), existed=set()) == []


def test_the_before_after_diff_lists_new_changed_and_gone_buckets() -> None:
    before = by_bucket([_row(0, 300, runs=3), _row(1, 100), _row(2, 50)])
    after = by_bucket([_row(0, 290, runs=1), _row(1, 100), BucketRow("dt=x", 0, 1, 5, 1, 1, 100)])
    assert changed_buckets(before, after) == [(_row(0, 1).partition, 0), (_row(0, 1).partition, 2), ("dt=x", 0)]
    lines = changes_markdown(before, after).splitlines()
    assert lines[2].endswith("| 0 | 3 → 1 | 3 → 1 | 300 → 290 |")
    assert lines[3].endswith("| 2 | 1 → 0 | 1 → 0 | 50 → 0 |")
    assert changes_markdown(before, before, empty="none") == "none"
