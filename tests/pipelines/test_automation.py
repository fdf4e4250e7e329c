"""The sorted-run sensor and the schedules, evaluated against tables written by the engine (no Spark)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from pipelines.automation import (
    compaction_job,
    daily_snapshot_expiry,
    hourly_ingestion,
    ingest_job,
    nightly_full_compaction,
    snapshot_expiry_job,
    sorted_runs_sensor,
)
from pipelines.definitions import defs
from pipelines.ingest import Ledger, list_landing_files
from pipelines.lsm import bucket_rows, partition_name
from pipelines.resources import LakehouseResource
from tests.pipelines.conftest import engine_write, events, only_keys

DAY = "2026-11-01"
NOON = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.timezone.utc)


@pytest.fixture
def instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.ephemeral()


def _table_with_hot_bucket(tmp_path: Path, trigger: int, commits_on_hot_key: int) -> tuple[LakehouseResource, int]:
    """A two-bucket table: one commit of 40 orders, then more commits of a single order, whose
    bucket ends with `1 + commits_on_hot_key` sorted runs; returns the resource and that bucket."""
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=2,
                                  table_options={"num-sorted-run.compaction-trigger": str(trigger)})
    rows = events(rows_per_day=60)
    engine_write(lakehouse, rows)
    hot = only_keys(rows, [rows.column("order_id")[0].as_py()]).slice(0, 1)
    for _ in range(commits_on_hot_key):
        engine_write(lakehouse, hot)
    runs = {r.bucket: r.sorted_runs for r in bucket_rows(lakehouse.get_table())}
    hot_bucket = max(runs, key=lambda b: runs[b])
    assert runs[hot_bucket] == 1 + commits_on_hot_key and min(runs.values()) == 1
    return lakehouse, hot_bucket


def _config_dict(request: dg.RunRequest) -> dict[str, Any]:
    config = request.run_config
    return config.to_config_dict() if isinstance(config, dg.RunConfig) else dict(config)


def _evaluate(instance: dg.DagsterInstance, lakehouse: LakehouseResource, cursor: str | None = None) -> Any:
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"lakehouse": lakehouse})
    return sorted_runs_sensor(context)


# ---- the sensor ----------------------------------------------------------------------------------
def test_the_sensor_skips_at_the_trigger(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse, _ = _table_with_hot_bucket(tmp_path, trigger=3, commits_on_hot_key=2)
    verdict = _evaluate(instance, lakehouse)
    assert isinstance(verdict, dg.SkipReason)
    assert "no bucket has more than 3 sorted runs (most: 3)" in (verdict.skip_message or "")


def test_the_sensor_requests_compaction_of_exactly_the_buckets_over_the_trigger(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse, hot_bucket = _table_with_hot_bucket(tmp_path, trigger=2, commits_on_hot_key=2)
    verdict = _evaluate(instance, lakehouse)
    assert isinstance(verdict, dg.SensorResult)
    [request] = verdict.run_requests or []
    snapshot = lakehouse.get_table().latest_snapshot()
    assert snapshot is not None
    assert request.run_key is not None and request.run_key.startswith(f"sorted-runs-{snapshot.id}-")
    config = _config_dict(request)
    assert config["ops"]["sorted_run_compaction"]["config"]["targets"] == [
        {"partition": partition_name(DAY), "bucket": hot_bucket}]
    assert dg.validate_run_config(defs.resolve_job_def(compaction_job.name), config)
    assert verdict.cursor == request.run_key
    assert request.tags["lakehouse/snapshot_id"] == str(snapshot.id)


def test_the_sensor_never_requests_the_same_state_twice(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse, _ = _table_with_hot_bucket(tmp_path, trigger=2, commits_on_hot_key=2)
    first = _evaluate(instance, lakehouse)
    again = _evaluate(instance, lakehouse, cursor=first.cursor)
    assert isinstance(again, dg.SkipReason)
    assert "already requested" in (again.skip_message or "")

    # A new snapshot is a new state: one more request, with another key.
    rows = events(rows_per_day=60)
    engine_write(lakehouse, only_keys(rows, [rows.column("order_id")[0].as_py()]).slice(0, 1))
    later = _evaluate(instance, lakehouse, cursor=first.cursor)
    assert isinstance(later, dg.SensorResult)
    assert later.run_requests[0].run_key not in (None, first.run_requests[0].run_key)


def test_the_sensor_waits_for_a_compaction_run_in_flight(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse, _ = _table_with_hot_bucket(tmp_path, trigger=2, commits_on_hot_key=2)
    instance.create_run_for_job(defs.resolve_job_def(compaction_job.name), status=dg.DagsterRunStatus.STARTED)
    verdict = _evaluate(instance, lakehouse)
    assert isinstance(verdict, dg.SkipReason)
    assert "has not finished yet" in (verdict.skip_message or "")


def test_the_sensor_skips_a_table_that_does_not_exist(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    verdict = _evaluate(instance, LakehouseResource(warehouse=str(tmp_path)))
    assert isinstance(verdict, dg.SkipReason)
    assert "does not exist" in (verdict.skip_message or "")


# ---- schedules ---------------------------------------------------------------------------------
def _land(lakehouse: LakehouseResource, dt: str, name: str = "orders.parquet") -> None:
    import pyarrow.parquet as pq

    folder = lakehouse.landing_path / f"dt={dt}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"order_id": [1]}), folder / name)


def _schedule_context(instance: dg.DagsterInstance, lakehouse: LakehouseResource) -> dg.ScheduleEvaluationContext:
    return dg.build_schedule_context(instance=instance, scheduled_execution_time=NOON,
                                     resources={"lakehouse": lakehouse})


def test_hourly_ingestion_requests_one_run_over_the_days_with_new_files(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path))
    _land(lakehouse, "2026-11-03")
    _land(lakehouse, "2026-11-05")
    _land(lakehouse, "2027-01-01")  # not a partition yet at NOON: waits
    request = hourly_ingestion(_schedule_context(instance, lakehouse))
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key is None
    assert request.tags["dagster/asset_partition_range_start"] == "2026-11-03"
    assert request.tags["dagster/asset_partition_range_end"] == "2026-11-05"
    # Dagster reads our tags as the range (the tag names are not imported from dagster._core)
    assert request.partition_key_range == dg.PartitionKeyRange("2026-11-03", "2026-11-05")


def test_hourly_ingestion_requests_a_single_day_by_its_partition(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path))
    _land(lakehouse, "2026-11-21")  # today's partition exists (end offset 1)
    request = hourly_ingestion(_schedule_context(instance, lakehouse))
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key == "2026-11-21"


def test_hourly_ingestion_skips_when_every_file_was_ingested(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path))
    assert isinstance(hourly_ingestion(_schedule_context(instance, lakehouse)), dg.SkipReason)
    _land(lakehouse, DAY)
    with Ledger(lakehouse.ledger_path).update() as state:
        for f in list_landing_files(lakehouse.landing_path):
            state.files[f.relpath] = {"batch": "earlier"}
    verdict = hourly_ingestion(_schedule_context(instance, lakehouse))
    assert isinstance(verdict, dg.SkipReason)
    assert "no new landing files" in (verdict.skip_message or "")


def test_schedules_target_their_jobs_at_their_times(instance: dg.DagsterInstance) -> None:
    assert (hourly_ingestion.cron_schedule, hourly_ingestion.job_name) == ("0 * * * *", ingest_job.name)
    assert (daily_snapshot_expiry.cron_schedule, daily_snapshot_expiry.job_name) == (
        "30 3 * * *", snapshot_expiry_job.name)
    assert (nightly_full_compaction.cron_schedule, nightly_full_compaction.job_name) == (
        "0 2 * * *", compaction_job.name)

    [expiry] = daily_snapshot_expiry.evaluate_tick(dg.build_schedule_context(
        instance=instance, scheduled_execution_time=NOON)).run_requests or []
    assert isinstance(expiry, dg.RunRequest)
    [nightly] = nightly_full_compaction.evaluate_tick(dg.build_schedule_context(
        instance=instance, scheduled_execution_time=NOON)).run_requests or []
    config = _config_dict(nightly)
    assert config["ops"]["sorted_run_compaction"]["config"]["full"] is True
    assert dg.validate_run_config(defs.resolve_job_def(compaction_job.name), config)
