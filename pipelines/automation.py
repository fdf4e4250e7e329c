"""Jobs, the sorted-run sensor, and the schedules (ingestion hourly, expiry daily, full compaction
nightly). Sensors and schedules read only manifests and the landing folder: none starts Spark.
"""

import hashlib
from collections.abc import Sequence

import dagster as dg

from lakehouse_engine.options import NUM_SORTED_RUN_COMPACTION_TRIGGER
from pipelines.ingest import DAILY_PARTITIONS, Ledger, ingested_events, list_landing_files
from pipelines.lsm import (
    BucketRow,
    BucketTarget,
    CompactionConfig,
    bucket_assignment,
    bucket_rows,
    buckets_over_trigger,
    lsm_write,
    sorted_run_compaction,
)
from pipelines.maintenance import postpone_compaction, rescale, snapshot_expiry
from pipelines.resources import LakehouseResource

# Dagster's documented run tags of a single-run backfill over a partition range (a RunRequest
# has no public argument for a range; `RunRequest.partition_key_range` reads these tags).
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
_COMPACTION_OP = sorted_run_compaction.op.name
_IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
              dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]

# ---- jobs (each runs the checks of its assets too) ----------------------------------------------
main_job = dg.define_asset_job(
    "main_job", selection=dg.AssetSelection.all(),
    description="Everything, for the days of the run: ingest, assign buckets, write, compact, rescale, expire.")
ingest_job = dg.define_asset_job(
    "ingest_job", selection=dg.AssetSelection.assets(ingested_events, bucket_assignment, lsm_write),
    description="New landing files of the run's days into the table.")
compaction_job = dg.define_asset_job(
    "compaction_job", selection=dg.AssetSelection.assets(sorted_run_compaction),
    description="Compact the buckets named in the run config (the sensor's request), or all of them.")
maintenance_job = dg.define_asset_job(
    "maintenance_job", selection=dg.AssetSelection.assets(postpone_compaction, rescale, snapshot_expiry),
    description="Postpone-bucket compaction, rescale (advice, or the configured target), snapshot expiry.")
snapshot_expiry_job = dg.define_asset_job(
    "snapshot_expiry_job", selection=dg.AssetSelection.assets(snapshot_expiry),
    description="Expire snapshots and remove orphan files.")

JOBS = [main_job, ingest_job, compaction_job, maintenance_job, snapshot_expiry_job]


# ---- the sorted-run sensor ------------------------------------------------------------------
def compaction_run_key(snapshot_id: int, buckets: Sequence[BucketRow]) -> str:
    """The state a compaction request answers: the snapshot and the buckets over the trigger."""
    names = ",".join(r.label for r in sorted(buckets, key=lambda r: (r.partition, r.bucket)))
    return f"sorted-runs-{snapshot_id}-{hashlib.sha1(names.encode()).hexdigest()[:12]}"


def compaction_run_config(buckets: Sequence[BucketRow]) -> dg.RunConfig:
    targets = [BucketTarget(partition=r.partition, bucket=r.bucket) for r in buckets]
    return dg.RunConfig(ops={_COMPACTION_OP: CompactionConfig(targets=targets)})


@dg.sensor(job=compaction_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED,
           description="Requests compaction of exactly the buckets whose sorted runs exceed "
                       "num-sorted-run.compaction-trigger, once per table state (manifests only, no Spark).")
def sorted_runs_sensor(context: dg.SensorEvaluationContext,
                       lakehouse: LakehouseResource) -> dg.SensorResult | dg.SkipReason:
    """One run per state (snapshot id + offending buckets): the run key and the cursor hold it."""
    if not lakehouse.table_exists():
        return dg.SkipReason(f"table {lakehouse.table} does not exist yet")
    table = lakehouse.get_table()
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return dg.SkipReason(f"table {lakehouse.table} has no snapshot yet")
    trigger = table.options.require(NUM_SORTED_RUN_COMPACTION_TRIGGER)
    rows = bucket_rows(table)
    over = buckets_over_trigger(rows, trigger)
    if not over:
        most = max((r.sorted_runs for r in rows), default=0)
        return dg.SkipReason(f"snapshot {snapshot.id}: no bucket has more than {trigger} sorted runs (most: {most})")
    run_key = compaction_run_key(snapshot.id, over)
    if context.cursor == run_key:
        return dg.SkipReason(f"snapshot {snapshot.id}: compaction of these {len(over)} buckets was already requested")
    in_flight = context.instance.get_run_records(
        dg.RunsFilter(job_name=compaction_job.name, statuses=_IN_FLIGHT), limit=1)
    if in_flight:
        return dg.SkipReason(f"compaction run {in_flight[0].dagster_run.run_id} has not finished yet")
    context.log.info(f"snapshot {snapshot.id}: {len(over)} buckets over {trigger} sorted runs")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=run_key, run_config=compaction_run_config(over),
                                    tags={"lakehouse/snapshot_id": str(snapshot.id),
                                          "lakehouse/buckets": str(len(over))})],
        cursor=run_key)


# ---- schedules ------------------------------------------------------------------------------
@dg.schedule(job=ingest_job, cron_schedule="0 * * * *", execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Every hour: one run over the days that have landing files not yet ingested.")
def hourly_ingestion(context: dg.ScheduleEvaluationContext,
                     lakehouse: LakehouseResource) -> dg.RunRequest | dg.SkipReason:
    known = set(DAILY_PARTITIONS.get_partition_keys(current_time=context.scheduled_execution_time))
    new = Ledger(lakehouse.ledger_path).read().new_files(list_landing_files(lakehouse.landing_path, known))
    days = sorted({f.dt for f in new})
    if not days:
        return dg.SkipReason(f"no new landing files under {lakehouse.landing_path}")
    if len(days) == 1:
        return dg.RunRequest(partition_key=days[0])
    # One run for the whole range (the assets' single-run backfill policy): one Spark session.
    return dg.RunRequest(tags={ASSET_PARTITION_RANGE_START_TAG: days[0], ASSET_PARTITION_RANGE_END_TAG: days[-1]})


daily_snapshot_expiry = dg.ScheduleDefinition(
    name="daily_snapshot_expiry", job=snapshot_expiry_job, cron_schedule="30 3 * * *",
    execution_timezone="UTC", default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Every day at 03:30 UTC: expire snapshots, remove orphan files.")

nightly_full_compaction = dg.ScheduleDefinition(
    name="nightly_full_compaction", job=compaction_job, cron_schedule="0 2 * * *",
    execution_timezone="UTC", default_status=dg.DefaultScheduleStatus.STOPPED,
    run_config=dg.RunConfig(ops={_COMPACTION_OP: CompactionConfig(full=True)}),
    description="Every night at 02:00 UTC: full compaction of every bucket into one sorted run.")

SENSORS = [sorted_runs_sensor]
SCHEDULES = [hourly_ingestion, daily_snapshot_expiry, nightly_full_compaction]
