"""The sorted-run sensor: requests compaction of exactly the buckets whose sorted runs exceed
`num-sorted-run.compaction-trigger`, passing them to `sorted_run_compaction` as run config.
It reads manifests only; it never starts Spark.
"""

import hashlib
from collections.abc import Sequence

import dagster as dg

from lakehouse_engine.options import NUM_SORTED_RUN_COMPACTION_TRIGGER
from pipelines.defs.compaction.assets import BucketTarget, CompactionConfig
from pipelines.defs.jobs import compaction_job
from pipelines.lib import keys
from pipelines.lib.bucket_report import BucketRow, bucket_rows, buckets_over_trigger
from pipelines.lib.resources import LakehouseResource

_COMPACTION_OP = keys.SORTED_RUN_COMPACTION.path[-1]  # an asset's op is named after its key
_IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
              dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


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
