"""The sorted-run sensor, the hourly schedule and the declarative automation conditions, evaluated
against tables written by the engine and an ephemeral instance (no Spark)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from pipelines.definitions import defs
from pipelines.defs.compaction.sensors import sorted_runs_sensor
from pipelines.defs.ingestion.schedules import hourly_ingestion
from pipelines.defs.jobs import compaction_job, ingest_job
from pipelines.lib import keys
from pipelines.lib.bucket_report import bucket_rows
from pipelines.lib.landing import list_landing_files
from pipelines.lib.ledger import Ledger
from pipelines.lib.partitions import partition_name
from pipelines.lib.resources import LakehouseResource
from tests.pipelines.conftest import DAY, engine_write, events, only_keys

UTC = datetime.timezone.utc
START = datetime.date.fromisoformat(DAY)  # the window's first day


def _day(offset: int) -> str:
    return (START + datetime.timedelta(days=offset)).isoformat()


NOON = datetime.datetime.combine(START + datetime.timedelta(days=4), datetime.time(12), UTC)


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
        tmp_path: Path, instance: dg.DagsterInstance, lakehouse_env: dict[str, str]) -> None:
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


def test_the_sensor_waits_for_a_compaction_run_in_flight(tmp_path: Path, instance: dg.DagsterInstance,
                                                        lakehouse_env: dict[str, str]) -> None:
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
    _land(lakehouse, _day(1))
    _land(lakehouse, _day(3))
    _land(lakehouse, _day(40))  # not a partition yet at NOON: waits
    request = hourly_ingestion(_schedule_context(instance, lakehouse))
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key is None
    assert request.tags["dagster/asset_partition_range_start"] == _day(1)
    assert request.tags["dagster/asset_partition_range_end"] == _day(3)
    # Dagster reads our tags as the range (the tag names are not imported from dagster._core)
    assert request.partition_key_range == dg.PartitionKeyRange(_day(1), _day(3))


def test_hourly_ingestion_requests_a_single_day_by_its_partition(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path))
    _land(lakehouse, _day(4))  # NOON's own day is a partition (end offset 1)
    request = hourly_ingestion(_schedule_context(instance, lakehouse))
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key == _day(4)


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


def test_the_hourly_schedule_targets_the_ingest_job() -> None:
    assert (hourly_ingestion.cron_schedule, hourly_ingestion.job_name) == ("0 * * * *", ingest_job.name)
    assert {s.name for s in defs.schedules or []} == {"hourly_ingestion"}


# ---- declarative automation ------------------------------------------------------------------------
class Nights:
    """Evaluates the automation conditions of full_compaction and snapshot_expiry at chosen times,
    carrying the cursor from one evaluation to the next as the automation sensor does."""

    SELECTION = dg.AssetSelection.assets(keys.FULL_COMPACTION, keys.SNAPSHOT_EXPIRY)

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance
        self.cursor: Any = None

    def at(self, day: int, hour: int, minute: int = 0) -> dict[str, int]:
        when = datetime.datetime.combine(START + datetime.timedelta(days=day), datetime.time(hour, minute), UTC)
        result = dg.evaluate_automation_conditions(defs=defs, instance=self.instance, cursor=self.cursor,
                                                   asset_selection=self.SELECTION, evaluation_time=when)
        self.cursor = result.cursor
        return {key.to_user_string(): result.get_num_requested(key)
                for key in (keys.FULL_COMPACTION, keys.SNAPSHOT_EXPIRY)}

    def materialized(self, key: dg.AssetKey, partition: str | None = None) -> None:
        self.instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=partition))


NOTHING = {"full_compaction": 0, "snapshot_expiry": 0}
BOTH = {"full_compaction": 1, "snapshot_expiry": 1}


def test_the_first_write_after_the_nightly_tick_requests_full_compaction_then_expiry_once(
        instance: dg.DagsterInstance) -> None:
    nights = Nights(instance)
    assert nights.at(1, 1) == NOTHING
    nights.materialized(keys.LSM_PUBLISH, partition=DAY)
    assert nights.at(1, 1, 30) == NOTHING  # written, but the 02:00 tick has not come
    assert nights.at(1, 2, 1) == NOTHING   # the tick: on_cron waits for a write after it
    nights.materialized(keys.LSM_PUBLISH, partition=_day(1))  # the 03:00 hourly ingestion
    # Full compaction, and expiry with it (on_cron counts a dependency requested in the same
    # evaluation): one run compacts, then expires the snapshots the compaction replaced.
    assert nights.at(1, 3, 5) == BOTH
    nights.materialized(keys.FULL_COMPACTION)
    nights.materialized(keys.SNAPSHOT_EXPIRY)
    nights.materialized(keys.LSM_PUBLISH, partition=_day(1))  # 04:00
    assert nights.at(1, 4, 5) == NOTHING  # once per tick
    nights.materialized(keys.LSM_PUBLISH, partition=_day(2))  # the next night's first write
    assert nights.at(2, 3, 5) == BOTH


def test_a_day_without_writes_requests_nothing(instance: dg.DagsterInstance) -> None:
    nights = Nights(instance)
    assert nights.at(1, 1) == NOTHING
    assert nights.at(1, 2, 1) == NOTHING
    assert nights.at(1, 12) == NOTHING  # nothing written: nothing to merge
    assert nights.at(2, 2, 1) == NOTHING


def test_rescale_and_sensor_compactions_do_not_hold_expiry_back(instance: dg.DagsterInstance) -> None:
    """Expiry waits for the full compaction only: its other parents run when needed, not nightly."""
    nights = Nights(instance)
    assert nights.at(1, 1) == NOTHING
    assert nights.at(1, 2, 1) == NOTHING
    nights.materialized(keys.FULL_COMPACTION)  # e.g. launched by hand after the tick
    assert nights.at(1, 2, 30) == {"full_compaction": 0, "snapshot_expiry": 1}


def test_the_automation_sensor_starts_stopped_and_covers_every_asset() -> None:
    [sensor] = [s for s in defs.sensors or [] if s.name == "lakehouse_automation"]
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    conditions = {k.to_user_string(): a.automation_conditions_by_key.get(k)
                  for a in defs.assets or [] for k in a.keys}
    assert {name for name, c in conditions.items() if c is not None} == {"full_compaction", "snapshot_expiry",
                                                                         "daily_revenue", "daily_revenue_publish"}


def test_daily_revenue_and_its_publish_are_requested_together_once_when_orders_are_published() -> None:
    """Eager on lsm_publish: a publish of any day (the window is never complete) requests one run
    of daily_revenue and daily_revenue_publish (the branch it publishes is that run's); nothing new,
    no request; a daily_revenue materialized without its publish (a failed audit) is not published
    on its own."""
    from pipelines.definitions import defs
    from pipelines.defs.downstream.assets import daily_revenue
    from pipelines.defs.downstream.publish import daily_revenue_publish
    from pipelines.lib import keys
    from tests.pipelines.conftest import DAY

    instance = dg.DagsterInstance.ephemeral()
    selection = dg.AssetSelection.assets(daily_revenue, daily_revenue_publish)
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=selection)
    assert first.total_requested == 0
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=keys.LSM_PUBLISH, partition=DAY))
    published = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=selection,
                                                  cursor=first.cursor)
    assert published.total_requested == 2
    assert published.get_requested_partitions(keys.DAILY_REVENUE_PUBLISH) == {None}
    idle = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=selection,
                                             cursor=published.cursor)
    assert idle.total_requested == 0
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=keys.DAILY_REVENUE))
    audit_failed = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=selection,
                                                     cursor=idle.cursor)
    assert audit_failed.total_requested == 0
