"""Asset checks on row counts per bucket: each passes on a sound table and fails when its
condition is broken; ERROR checks block what depends on their asset, the skew check only warns.

Tables here are written with the engine alone (no Spark), and the checks run through `materialize`.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from pipelines.defs.compaction.assets import sorted_run_compaction
from pipelines.defs.lsm.assets import lsm_write
from pipelines.defs.lsm.checks import (
    bucket_skew,
    dynamic_buckets_within_target,
    no_duplicate_primary_key,
)
from pipelines.defs.maintenance.assets import postpone_compaction, rescale
from pipelines.defs.maintenance.checks import postpone_bucket_empty
from pipelines.lib.bucket_report import BucketRow, bucket_rows
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.table_checks import duplicates_result, row_counts_result, skew_result
from tests.pipelines.conftest import (
    ASSET_CHECKS,
    ASSETS,
    DAY,
    check_results,
    engine_write,
    events,
    metadata_of,
)

ALL = [*ASSETS, *ASSET_CHECKS]
# Never started: the checks below must not need Spark.
NO_SPARK = LakehouseSparkResource(master="spark://no-such-host:1")


def _run(lakehouse: LakehouseResource, selection: Any) -> Any:
    return dg.materialize(ALL, selection=selection, raise_on_error=False,
                          resources={"lakehouse": lakehouse, "spark": NO_SPARK})


# ---- postpone bucket --------------------------------------------------------------------------
def test_postpone_compaction_moves_every_row_and_leaves_the_bucket_empty(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=-2,
                                  table_options={"postpone.default-bucket-num": "3"})
    rows = events(rows_per_day=300, days=2)
    engine_write(lakehouse, rows)
    before = bucket_rows(lakehouse.get_table())
    assert {r.bucket for r in before} == {POSTPONE_BUCKET}
    waiting = sum(r.records for r in before)  # merged per key when the writer flushed

    result = _run(lakehouse, dg.AssetSelection.assets(postpone_compaction))
    assert result.success
    meta = metadata_of(result, "postpone_compaction")
    assert (meta["rows_moved"], meta["partitions_moved"], meta["buckets_created"]) == (waiting, 2, 6)
    assert meta["rows_in_postpone_bucket"] == 0
    assert check_results(result)["postpone_compaction:postpone_bucket_empty"].passed
    assert {r.bucket for r in bucket_rows(lakehouse.get_table())} == {0, 1, 2}


def test_rows_left_in_bucket_postpone_fail_the_check_and_block_rescale(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=-2)
    engine_write(lakehouse, events(rows_per_day=100))

    result = _run(lakehouse, dg.AssetSelection.checks(postpone_bucket_empty) | dg.AssetSelection.assets(rescale))
    evaluation = check_results(result)["postpone_compaction:postpone_bucket_empty"]
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["partitions_with_postponed_rows"].value == 1
    assert not result.success
    assert not result.get_asset_materialization_events()  # rescale did not run


# ---- dynamic bucket target ---------------------------------------------------------------------
def test_dynamic_buckets_within_target_pass(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=-1,
                                  table_options={"dynamic-bucket.target-row-num": "60"})
    engine_write(lakehouse, events(rows_per_day=300))
    result = _run(lakehouse, dg.AssetSelection.checks(dynamic_buckets_within_target))
    evaluation = check_results(result)["lsm_write:dynamic_buckets_within_target"]
    assert evaluation.passed
    assert evaluation.metadata["buckets"].value > 1
    assert evaluation.metadata["max_keys_in_a_bucket"].value <= 60


def test_a_dynamic_bucket_over_target_fails_the_check(tmp_path: Path) -> None:
    # Past dynamic-bucket.max-buckets new keys spread over the existing buckets: one bucket, every key.
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=-1, table_options={
        "dynamic-bucket.target-row-num": "60", "dynamic-bucket.max-buckets": "1"})
    rows = events(rows_per_day=300)
    engine_write(lakehouse, rows)
    keys = len(set(rows.column("order_id").to_pylist()))

    result = _run(lakehouse, dg.AssetSelection.checks(dynamic_buckets_within_target))
    evaluation = check_results(result)["lsm_write:dynamic_buckets_within_target"]
    assert not evaluation.passed
    assert evaluation.metadata["buckets_over_target"].value == 1
    assert evaluation.metadata["max_keys_in_a_bucket"].value == keys


# ---- bucket skew -------------------------------------------------------------------------------
def _skewed_rows(lakehouse: LakehouseResource, n: int) -> pa.Table:
    """`n` events with most order ids hashing to bucket 0 of the table."""
    table = lakehouse.get_or_create_table()
    rows = events(rows_per_day=n * 3)
    rows = rows.filter(pc.equal(rows.column("_rowkind"), "+I")).slice(0, n * 2)
    buckets = bucket_of(hash_rows([rows.column("order_id")], table.schema.types_of(["order_id"])),
                        table.options.bucket)
    keep = (buckets == 0) | (np.arange(rows.num_rows) % 10 == 0)
    return rows.filter(pa.array(keep))


def test_bucket_skew_warns_without_blocking(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=4)
    engine_write(lakehouse, _skewed_rows(lakehouse, 2_000))

    result = _run(lakehouse, dg.AssetSelection.checks(bucket_skew) | dg.AssetSelection.assets(sorted_run_compaction))
    evaluation = check_results(result)["lsm_write:bucket_skew"]
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.metadata["max_skew"].value > 2.0
    assert result.success
    assert metadata_of(result, "sorted_run_compaction")["buckets_compacted"] == 0


def test_an_even_table_passes_row_count_skew_and_target_checks(lakehouse: LakehouseResource) -> None:
    engine_write(lakehouse, events(rows_per_day=2_000))
    engine_write(lakehouse, events(rows_per_day=2_000, seed=9))
    spark_check = dg.AssetSelection.checks(no_duplicate_primary_key)
    without_spark = dg.AssetSelection.checks_for_assets(lsm_write) - spark_check
    result = _run(lakehouse, without_spark)
    verdicts = {name: e.passed for name, e in check_results(result).items()}
    assert verdicts == {"lsm_write:bucket_row_counts_match_snapshot": True, "lsm_write:bucket_skew": True,
                        "lsm_write:dynamic_buckets_within_target": True, "lsm_write:contract_keys_on_branch": True}
    counts = check_results(result)["lsm_write:bucket_row_counts_match_snapshot"].metadata
    snapshot = lakehouse.get_table().latest_snapshot()
    assert snapshot is not None
    assert counts["rows_in_buckets"].value == counts["snapshot_record_count"].value == snapshot.total_record_count
    assert counts["difference"].value == 0


def test_checks_of_a_table_without_snapshots_pass_without_starting_spark(lakehouse: LakehouseResource) -> None:
    result = _run(lakehouse, dg.AssetSelection.checks(*ASSET_CHECKS))
    assert result.success
    assert len(check_results(result)) == len(ASSET_CHECKS) == 10
    assert all(e.passed for e in check_results(result).values())


def test_a_run_that_wrote_nothing_checks_keys_without_starting_spark(lakehouse: LakehouseResource) -> None:
    from pipelines.defs.ingestion.assets import ingested_events
    from pipelines.defs.lsm.assets import bucket_assignment

    engine_write(lakehouse, events(rows_per_day=100))  # a table with a snapshot, and no landing files
    assets = [ingested_events, bucket_assignment, lsm_write, no_duplicate_primary_key]
    result = dg.materialize(assets, partition_key=DAY, raise_on_error=False,
                            resources={"lakehouse": lakehouse, "spark": NO_SPARK})
    assert result.success  # NO_SPARK fails if anything starts a session
    assert metadata_of(result, "lsm_write")["rows_written"] == 0
    evaluation = check_results(result)["lsm_write:no_duplicate_primary_key"]
    assert evaluation.passed and evaluation.description == "lsm_write wrote no rows in this run; Spark not started"


# ---- the conditions themselves ---------------------------------------------------------------------
def _rows(*records: int, partition: str = "dt=2026-11-01") -> list[BucketRow]:
    return [BucketRow(partition, b, len(records), n, 1, 1, n * 10) for b, n in enumerate(records)]


def test_row_counts_that_do_not_add_up_fail() -> None:
    snapshot: Any = SimpleNamespace(id=7, total_record_count=100)
    assert row_counts_result(_rows(60, 40), snapshot).passed
    failed = row_counts_result(_rows(60, 39), snapshot)
    assert not failed.passed
    assert failed.description == "buckets hold 99 rows in files but snapshot 7 counts 100"


@pytest.mark.parametrize(("records", "passed"), [((500, 500), True), ((1_500, 500), True),
                                                 ((1_600, 400), False), ((300, 10), True)])
def test_skew_is_largest_over_mean_in_partitions_big_enough(records: tuple[int, int], passed: bool) -> None:
    # (1500, 500): 1.5x the mean; (1600, 400): 1.6x; (300, 10) is too small to judge.
    assert skew_result(_rows(*records), threshold=1.6).passed is passed


def test_duplicates_are_listed() -> None:
    assert duplicates_result([], "all").passed
    failed = duplicates_result([{"order_id": 1, "dt": "2026-11-01", "count": 2}], "2026-11-01")
    assert not failed.passed
    assert "| 1 | 2026-11-01 | 2 |" in failed.metadata["examples"].value
