"""Compaction on Spark executors, one COMPACT commit each.

`sorted_run_compaction` compacts the buckets the sorted-run sensor names in its run config (or,
launched by hand without targets, every bucket over `num-sorted-run.compaction-trigger`);
`full_compaction` rewrites every bucket into one sorted run once a day, by a declarative
`AutomationCondition.on_cron` (after the 02:00 UTC tick, at the first LSM write). Both hold the table's pool, like every asset that commits to it.
"""

from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_engine import FileStoreTable
from lakehouse_engine.options import NUM_SORTED_RUN_COMPACTION_TRIGGER
from pipelines.lib import keys
from pipelines.lib.bucket_report import (
    BucketKey,
    bucket_metadata,
    bucket_rows,
    buckets_over_trigger,
    by_bucket,
    changed_buckets,
    changes_markdown,
)
from pipelines.lib.partitions import SINGLE_RUN, partition_values
from pipelines.lib.resources import (
    DEFAULT_TABLE,
    LakehouseResource,
    LakehouseSparkResource,
    table_pool,
)

TABLE_POOL = table_pool(DEFAULT_TABLE)
NIGHTLY_FULL_COMPACTION_CRON = "0 2 * * *"


class BucketTarget(dg.Config):
    """One bucket to compact: its partition (`dt=2026-11-21`) and bucket number."""

    partition: str
    bucket: int


class CompactionConfig(dg.Config):
    """The buckets to compact (the sensor's request); with no targets, every bucket over
    `num-sorted-run.compaction-trigger`."""

    targets: list[BucketTarget] = []


def compact_buckets(spark: SparkSession, table: FileStoreTable, buckets: set[BucketKey] | None,
                    full: bool = False) -> list[int]:
    """Compact these (partition, bucket)s (all when None) on Spark executors and commit once.

    Partitions are named as `bucket_rows` names them (`dt=2026-11-21`); those the table still has
    are turned into partition values for `lakehouse_engine.spark.compact`."""
    from lakehouse_engine.spark import compact

    if buckets is None:
        return compact(spark, table, full=full)
    live = {r.partition for r in bucket_rows(table)}
    wanted = [(partition_values(name), bucket) for name, bucket in sorted(buckets) if name in live]
    return compact(spark, table, full=full, buckets=wanted) if wanted else []


def _compaction_result(context: dg.AssetExecutionContext, lakehouse: LakehouseResource, kind: str,
                       requested: int, before: dict[BucketKey, Any], ids: list[int],
                       trigger: int) -> dg.MaterializeResult:
    """The metadata of a compaction: the buckets it changed (before -> after) and the bucket tables."""
    table = lakehouse.get_table()
    after = by_bucket(bucket_rows(table))
    # The buckets the commit rewrote: a file rewritten to the same shape changes no count.
    added = table.files_added(ids)
    rewritten = set(zip(added.column("partition").to_pylist(), added.column("bucket").to_pylist(), strict=True))
    snapshot = table.latest_snapshot()
    context.log.info(f"{kind}: compacted {len(rewritten)} buckets (trigger {trigger}); snapshots {ids}")
    return dg.MaterializeResult(metadata={
        "snapshot_id": snapshot.id if snapshot else 0,
        "compaction": kind,
        "compaction_trigger": trigger,
        "buckets_requested": requested,
        "buckets_compacted": len(rewritten),
        "buckets_changed": len(changed_buckets(before, after)),
        "compacted": dg.MetadataValue.md(changes_markdown(before, after, empty="Nothing to compact.")),
        "snapshots_committed": ", ".join(map(str, ids)) or "none",
        **bucket_metadata(list(after.values())),
    })


def _absent() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"buckets_compacted": 0, "note": "the table does not exist yet"})


@dg.asset(
    # Table-wide, one run anyway; the policy lets `dagster asset materialize --partition-range`
    # select it together with the daily assets (the CLI requires it of every selected asset).
    backfill_policy=SINGLE_RUN,
    deps=[keys.LSM_PUBLISH],
    pool=TABLE_POOL,
    group_name="lsm",
    kinds={"spark", "paimon"},
    description="Universal compaction of the buckets the sorted-run sensor names (or of every bucket "
                "over the trigger), on Spark executors, one COMPACT commit.",
)
def sorted_run_compaction(context: dg.AssetExecutionContext, config: CompactionConfig,
                          spark: LakehouseSparkResource, lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Compact the requested buckets (the sensor names them), or every bucket over the trigger."""
    if not lakehouse.table_exists():
        return _absent()
    table = lakehouse.get_table()
    trigger = table.options.require(NUM_SORTED_RUN_COMPACTION_TRIGGER)
    before = by_bucket(bucket_rows(table))
    if config.targets:
        wanted = {(t.partition, t.bucket) for t in config.targets}
    else:
        wanted = {(r.partition, r.bucket) for r in buckets_over_trigger(before.values(), trigger)}
    ids = compact_buckets(spark.spark_session, table, wanted) if wanted else []
    return _compaction_result(context, lakehouse, "universal", len(wanted), before, ids, trigger)


@dg.asset(
    backfill_policy=SINGLE_RUN,
    deps=[keys.LSM_PUBLISH],
    pool=TABLE_POOL,
    group_name="lsm",
    kinds={"spark", "paimon"},
    # Once a day: after the 02:00 UTC tick, as soon as the LSM write has committed again (with the
    # hourly schedule, the first ingestion past 02:00). A day without new rows has nothing to merge.
    automation_condition=dg.AutomationCondition.on_cron(NIGHTLY_FULL_COMPACTION_CRON, "UTC"),
    description="Full compaction: every bucket rewritten into one sorted run, on Spark executors, one "
                "COMPACT commit. Once a day, at the first LSM write after 02:00 UTC (AutomationCondition.on_cron).",
)
def full_compaction(context: dg.AssetExecutionContext, spark: LakehouseSparkResource,
                    lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Rewrite every bucket of the table into a single sorted run."""
    if not lakehouse.table_exists():
        return _absent()
    table = lakehouse.get_table()
    trigger = table.options.require(NUM_SORTED_RUN_COMPACTION_TRIGGER)
    before = by_bucket(bucket_rows(table))
    ids = compact_buckets(spark.spark_session, table, None, full=True)
    return _compaction_result(context, lakehouse, "full", len(before), before, ids, trigger)
