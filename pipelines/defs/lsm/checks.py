"""Checks on what the LSM write committed: row counts per bucket, the dynamic-bucket target, no
duplicate primary key in a merged read (Spark), and bucket skew (WARN)."""

import dagster as dg

from lakehouse_engine.options import DYNAMIC_BUCKET_TARGET_ROW_NUM
from pipelines.lib import keys, wap
from pipelines.lib.bucket_report import bucket_rows
from pipelines.lib.events import PRIMARY_KEY
from pipelines.lib.partitions import partition_name, run_days
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.table_checks import (
    MAX_BUCKET_SKEW,
    NO_SNAPSHOT,
    duplicates_result,
    dynamic_target_result,
    keys_staged_in_run,
    latest_snapshot_of,
    passed_empty,
    row_counts_check,
    rows_written_in_run,
    skew_result,
    written_run,
)

lsm_write_row_counts = row_counts_check(keys.LSM_WRITE, audited=True)


@dg.asset_check(asset=keys.LSM_WRITE, blocking=True,
                description="No dynamic bucket holds more keys than dynamic-bucket.target-row-num "
                            "(its HASH index counts the keys; on the run's audit branch).")
def dynamic_buckets_within_target(context: dg.AssetCheckExecutionContext,
                                  lakehouse: LakehouseResource) -> dg.AssetCheckResult:
    latest = latest_snapshot_of(lakehouse, written_run(context.instance, context.run.run_id))
    if latest is None:
        return passed_empty()
    table, snapshot = latest
    if not table.bucket_mode().assigns_dynamically:
        return passed_empty(f"not a dynamic-bucket table ('bucket' = {table.options.bucket})")
    keys_per_bucket = {(r["partition"], r["bucket"]): r["row_count"]
                       for r in table.index_stats(snapshot.id).to_pylist() if r["index_type"] == "HASH"}
    return dynamic_target_result(keys_per_bucket, table.options.require(DYNAMIC_BUCKET_TARGET_ROW_NUM))


@dg.asset_check(asset=keys.LSM_WRITE, blocking=True,
                description="No (order_id, dt) appears twice when the run's partitions are read "
                            "merged through the `lakehouse` Spark data source (the run's audit branch).")
def no_duplicate_primary_key(context: dg.AssetCheckExecutionContext, spark: LakehouseSparkResource,
                             lakehouse: LakehouseResource) -> dg.AssetCheckResult:
    from pyspark.sql import functions as F

    latest = latest_snapshot_of(lakehouse, written_run(context.instance, context.run.run_id))
    if latest is None:
        return passed_empty()  # nothing to read: no reason to start Spark
    if rows_written_in_run(context) == 0:
        # The write of this run committed nothing: the table's keys are as the last check saw them.
        return dg.AssetCheckResult(passed=True, description="lsm_write wrote no rows in this run; Spark not started",
                                   metadata={"rows_written": 0})
    days = run_days(context)
    reader = (spark.spark_session.read.format("lakehouse").option("warehouse", lakehouse.warehouse_root)
              .options(**lakehouse.all_catalog_options).option("columns", ",".join(PRIMARY_KEY)))
    if days:
        reader = reader.option("partitions", ";".join(partition_name(d) for d in days))
    audited = latest[0]
    name = lakehouse.table if audited.branch == "main" else f"{lakehouse.table}$branch_{audited.branch}"
    dups = reader.load(name).groupBy(*PRIMARY_KEY).count().where(F.col("count") > 1)
    found = [row.asDict() for row in dups.limit(1_000).collect()]
    return duplicates_result(found, ", ".join(days) if days else "all")


@dg.asset_check(asset=keys.LSM_WRITE, blocking=False,
                description=f"In each partition the largest bucket holds under {MAX_BUCKET_SKEW}x the "
                            f"mean bucket's rows (WARN).")
def bucket_skew(context: dg.AssetCheckExecutionContext, lakehouse: LakehouseResource) -> dg.AssetCheckResult:
    latest = latest_snapshot_of(lakehouse, written_run(context.instance, context.run.run_id))
    if latest is None:
        return passed_empty()
    return skew_result(bucket_rows(latest[0]))


@dg.asset_check(asset=keys.LSM_WRITE, blocking=True,
                description="Every primary key among the rows the event contract (pandera) passed and "
                            "lsm_write staged reached the run's audit branch: distinct keys in the "
                            "branch's new records equal distinct keys staged.")
def contract_keys_on_branch(context: dg.AssetCheckExecutionContext,
                            lakehouse: LakehouseResource) -> dg.AssetCheckResult:
    staged = keys_staged_in_run(context)
    latest = latest_snapshot_of(lakehouse, written_run(context.instance, context.run.run_id))
    if latest is None or staged is None:
        return passed_empty("lsm_write did not write in this run" if staged is None else NO_SNAPSHOT)
    table, head = latest
    if table.branch == "main":
        return passed_empty("no open audit branch in this run")
    main = lakehouse.get_table()
    base = wap.branch_base(main, table.branch)
    main_latest = main.latest_snapshot()
    written = 0
    if head.id > base:
        records = table.changes(base, head.id, mode="delta")
        written = records.select(list(PRIMARY_KEY)).group_by(list(PRIMARY_KEY)).aggregate([]).num_rows
    return dg.AssetCheckResult(
        passed=written == staged,
        description=None if written == staged else
        f"{staged:,} primary keys were staged but the audit branch's new records hold {written:,}",
        # main_snapshot_id: what readers of main see while the batch is audited (the branch base).
        metadata={"audit_branch": table.branch, "branch_base_snapshot": base, "keys_staged": staged,
                  "keys_on_branch": written, "main_snapshot_id": main_latest.id if main_latest else 0})
