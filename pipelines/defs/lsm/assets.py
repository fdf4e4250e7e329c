"""The LSM side of the table: bucket assignment and the Spark write of the staged rows.

`bucket_assignment` says where the staged rows go before they are written, and says how sure it
is: the fixed-bucket hash and bucket-postpone are exact; a dynamic-bucket table is exact only when
the write runs one bucket assigner, because with n assigners each Spark task places its share of
the keys against the HASH index on its own. `lsm_write` then reports what it wrote per bucket
(the files its commit added), so the plan can be compared with the truth.
"""

import json
import shutil
import uuid
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from lakehouse_engine import (
    POSTPONE_BUCKET,
    BucketMode,
    FileStoreTable,
    PostCommitError,
    SchemaError,
)
from lakehouse_engine.options import DYNAMIC_BUCKET_ASSIGNER_PARALLELISM
from lakehouse_engine.spark import TableRef, bucket_column
from pipelines.lib import keys, wap
from pipelines.lib.bucket_report import (
    bar_chart_markdown,
    bucket_label,
    bucket_metadata,
    bucket_rows,
    bucket_text,
    skew,
)
from pipelines.lib.events import EVOLUTION_COLUMNS, PARTITION_KEY, PRIMARY_KEY
from pipelines.lib.ledger import Ledger
from pipelines.lib.partitions import DAILY_PARTITIONS, SINGLE_RUN, partition_name, per_day_metadata
from pipelines.lib.resources import (
    DEFAULT_TABLE,
    LakehouseResource,
    LakehouseSparkResource,
    table_pool,
)
from pipelines.lib.runs import run_is_running
from pipelines.lib.staging import read_staged

BUCKET = "bucket"
ROWS = "rows"
#: The bucket of a plan row whose bucket only the write's assigners decide (dynamic, n > 1).
UNDECIDED = -1
TABLE_POOL = table_pool(DEFAULT_TABLE)


# ---- bucket assignment -------------------------------------------------------------------------
def dynamic_bucket_counts(ref: TableRef, rows: pa.Table) -> pa.Table:
    """Rows per dynamic bucket for rows of one partition: (dt, bucket, rows).

    `table.preview_buckets` runs the engine's assigner over the table's current HASH index
    without writing index files: where a write with one assigner puts the rows.
    """
    buckets = ref.open().preview_buckets(rows)
    counts = pa.table({BUCKET: buckets}).group_by(BUCKET).aggregate([(BUCKET, "count")])
    return pa.table({
        PARTITION_KEY: pa.array([rows.column(PARTITION_KEY)[0].as_py()] * counts.num_rows, pa.string()),
        BUCKET: counts.column(BUCKET),
        ROWS: counts.column(f"{BUCKET}_count").cast(pa.int64()),
    })


PLAN_TABLE_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("partition", "string"), dg.TableColumn("bucket", "string"), dg.TableColumn("rows", "int"),
    dg.TableColumn("new", "bool", description="the write creates this bucket")])
PLAN_SCHEMA = StructType([StructField(PARTITION_KEY, StringType()), StructField(BUCKET, IntegerType()),
                          StructField(ROWS, LongType())])


DECIDED_BY_WRITE = ("decided by the write's dynamic bucket assigners (one per Spark task; "
                    "lsm_write reports the buckets written)")


def plan_is_exact(table: FileStoreTable) -> bool:
    """Whether a plan made before the write names the buckets the Spark write uses: always for fixed
    and postpone buckets; for dynamic buckets only with one assigner
    (`dynamic-bucket.assigner-parallelism` = 1), since n assigners each place their share of the
    keys against the HASH index on their own."""
    if not table.bucket_mode().assigns_dynamically:
        return True
    configured = table.options.get(DYNAMIC_BUCKET_ASSIGNER_PARALLELISM)
    return configured is not None and int(configured) == 1


def assign_buckets(rows: DataFrame, table: FileStoreTable, exact: bool = True) -> list[tuple[str, int, int]]:
    """(dt, bucket, rows) for rows about to be written, computed on Spark for the table's mode.

    A dynamic-bucket table whose write runs several assigners (`exact` False) gets one row per
    day with bucket `UNDECIDED`: which assigner opens which bucket depends on the routing of that
    write, so a single-assigner preview would name buckets the write does not use."""
    mode = table.bucket_mode()
    ref = TableRef.of(table)
    if mode is BucketMode.FIXED:
        counted = (rows.groupBy(PARTITION_KEY, bucket_column(rows, table, ref).alias(BUCKET))
                   .agg(F.count(F.lit(1)).alias(ROWS)))
    elif mode.assigns_dynamically and exact:
        def per_partition(group: pa.Table) -> pa.Table:  # Spark reads these type hints
            return dynamic_bucket_counts(ref, group)

        counted = rows.groupBy(PARTITION_KEY).applyInArrow(per_partition, PLAN_SCHEMA)
    else:  # postpone: every row waits in bucket-postpone; dynamic with n assigners: the write decides
        bucket = POSTPONE_BUCKET if mode is BucketMode.POSTPONE else UNDECIDED
        counted = (rows.groupBy(PARTITION_KEY).agg(F.count(F.lit(1)).alias(ROWS))
                   .select(PARTITION_KEY, F.lit(bucket).alias(BUCKET), ROWS))
    return sorted((r[PARTITION_KEY], int(r[BUCKET]), int(r[ROWS])) for r in counted.collect())


def _plan_label(dt: str, bucket: int) -> str:
    return f"{partition_name(dt)}/by the write" if bucket == UNDECIDED else bucket_label(partition_name(dt), bucket)


@dg.asset(
    partitions_def=DAILY_PARTITIONS,
    backfill_policy=SINGLE_RUN,
    deps=[keys.INGESTED_EVENTS],
    group_name="lsm",
    kinds={"spark", "paimon"},
    description="The bucket of every staged row for the table's bucket mode: exact for fixed and "
                "postpone buckets and for a dynamic-bucket write with one assigner; with several "
                "assigners the write decides, and lsm_write reports the buckets it wrote.",
)
def bucket_assignment(context: dg.AssetExecutionContext, spark: LakehouseSparkResource,
                      lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Assign buckets to the staged rows not yet written and record the plan beside the staging."""
    table = lakehouse.get_or_create_table()
    mode = table.bucket_mode()
    pending = Ledger(lakehouse.ledger_path).read().pending(context.partition_keys)
    base: dict[str, Any] = {"bucket_mode": mode.value, "table_buckets_option": table.options.bucket}
    if not pending:
        return dg.MaterializeResult(metadata={**base, "rows": 0, "new_buckets": 0,
                                              "dagster/row_count": 0})
    exact = plan_is_exact(table)
    plan = assign_buckets(read_staged(spark.spark_session, lakehouse.staging_path, pending), table, exact)
    existing = {(r.partition, r.bucket) for r in bucket_rows(table, context.partition_keys)}
    new = [(dt, b) for dt, b, _ in plan
           if (partition_name(dt), b) not in existing and b not in (POSTPONE_BUCKET, UNDECIDED)]
    kind = "exact" if exact else DECIDED_BY_WRITE
    # One file per run's days, replaced by the next plan of those days: the folder stays bounded.
    days = sorted(context.partition_keys)
    path = lakehouse.staging_path / "bucket_plans" / f"{days[0]}_{days[-1]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"bucket_mode": mode.value, "assignment": kind,
                                "buckets": [{"dt": dt, "bucket": None if b == UNDECIDED else b, "rows": n,
                                             "new": (dt, b) in new} for dt, b, n in plan]}, indent=1))

    def figures(part: list[tuple[str, int, int]]) -> dict[str, Any]:
        counts = [n for _, _, n in part]
        fresh = [(dt, b) for dt, b, _ in part if (dt, b) in new]
        decided = [n for _, b, n in part if b != UNDECIDED]
        return {
            "rows": sum(counts),
            "dagster/row_count": sum(counts),
            "buckets_assigned": len(decided),
            "new_buckets": len(fresh),
            "new_bucket_list": ", ".join(bucket_label(partition_name(dt), b) for dt, b in fresh) or "none",
            "rows_per_bucket": dg.MetadataValue.table(
                [dg.TableRecord({"partition": partition_name(dt), "bucket": "by the write" if b == UNDECIDED
                                 else bucket_text(b), "rows": n, "new": (dt, b) in new}) for dt, b, n in part],
                schema=PLAN_TABLE_SCHEMA),
            "rows_per_bucket_chart": dg.MetadataValue.md(
                bar_chart_markdown([(_plan_label(dt, b), n) for dt, b, n in part])),
            "bucket_skew": float(round(skew(decided), 3)) if decided else 0.0,
        }

    per_day_metadata(context, {dt: figures([p for p in plan if p[0] == dt]) for dt in {p[0] for p in plan}})
    context.log.info(f"{sum(n for _, _, n in plan):,} rows ({mode.value}, {kind}), {len(new)} new buckets")
    return dg.MaterializeResult(metadata={**base, **figures(plan), "assignment": kind,
                                          "plan": dg.MetadataValue.path(str(path))})


# ---- the LSM write -----------------------------------------------------------------------------
WRITTEN_TABLE_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("partition", "string"), dg.TableColumn("bucket", "string"),
    dg.TableColumn("files", "int"), dg.TableColumn("records", "int",
                                                   description="records in the files the commit added"),
    dg.TableColumn("new", "bool", description="the bucket did not exist before this write")])


def written_buckets(files: pa.Table, existed: set[tuple[str, int]]) -> list[dict[str, Any]]:
    """Per (partition, bucket) the files a commit added and their records, and whether the bucket is new."""
    if files.num_rows == 0:
        return []
    grouped = files.group_by(["partition", "bucket"]).aggregate([("row_count", "sum"), ("row_count", "count")])
    rows = sorted(grouped.to_pylist(), key=lambda r: (r["partition"], r["bucket"]))
    return [{"partition": r["partition"], "bucket": bucket_text(r["bucket"]), "files": r["row_count_count"],
             "records": r["row_count_sum"], "new": (r["partition"], r["bucket"]) not in existed
             and r["bucket"] != POSTPONE_BUCKET} for r in rows]


def take_level0_up(table: FileStoreTable, days: list[str]) -> list[int]:
    """After the write-only commit, take the level 0 of the days' buckets up into one new sorted run
    each, merging no run (`table.compact(level0_only=True)`): the table's `lookup` changelog of
    the write lands now, in a COMPACT snapshot on the audit branch, while sorted runs still pile up
    above level 0 for the sorted-run sensor. A bucket with no free level keeps its level 0 (and
    its changelog) for that sensor's compaction. Returns the snapshot ids."""
    return table.compact(partitions=[{PARTITION_KEY: dt} for dt in days], level0_only=True)


@dg.asset(
    partitions_def=DAILY_PARTITIONS,
    backfill_policy=SINGLE_RUN,
    deps=[keys.BUCKET_ASSIGNMENT],
    pool=TABLE_POOL,
    group_name="lsm",
    kinds={"spark", "paimon"},
    description="The staged rows written by Spark into the run's audit branch of the table "
                "(write-audit-publish: main does not see them until lsm_publish), one commit per "
                "run, then its level 0 taken up into one new sorted run per bucket written (a COMPACT "
                "snapshot holding the lookup changelog, no run merged); an evolution column the staged "
                "rows carry is added to the table first (the lakehouse resource's evolve_schema).",
)
def lsm_write(context: dg.AssetExecutionContext, spark: LakehouseSparkResource,
              lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Write the staged, uncommitted rows of the run's days in one Spark commit to the run's
    audit branch (made at main's latest snapshot; failed audits of finished runs discarded first)."""
    import lakehouse_engine.spark as lakehouse_spark

    main = lakehouse.get_or_create_table()
    for gone in wap.discard_finished(main, run_is_running(context.instance)):
        context.log.info(f"discarded audit branch {gone} of a finished run")
    branch = wap.audit_branch_name(context.run.run_id)
    table = wap.open_audit_branch(main, context.run.run_id)
    columns_before = table.schema.field_names
    existed = {(r.partition, r.bucket) for r in bucket_rows(table, context.partition_keys)}
    dts = list(context.partition_keys)
    done: list[str] = []
    ledger = Ledger(lakehouse.ledger_path)
    with ledger.update() as state:
        pending = state.pending(dts)
        ids: list[int] = []
        level0_up: list[int] = []
        keys_staged = 0
        commit_user = ""
        # Rows an interrupted run committed, though it did not live to record it: never twice.
        for user, entries in state.committing_users(pending).items():
            landed = main.committed_snapshots(user)  # landed means: published to main
            if landed:
                context.log.warning(f"commit {user} of an earlier run had landed in snapshot {landed[0]}; "
                                    f"its {len(entries)} staged parts are not written again")
                done += state.mark_written(entries, landed[-1])
                pending = [p for p in pending if p not in entries]
        if pending:
            # Recorded before the write, so that a rerun can tell whether this commit landed.
            commit_user = f"lsm_write-{uuid.uuid4()}"
            state.mark_committing(pending, commit_user)
            ledger.save(state)
            # The evolution columns the staged rows carry, and those the table has already gained
            # (null in rows staged before the events had them).
            extra = [c for c in EVOLUTION_COLUMNS if c in state.columns_of(pending) or c in columns_before]
            rows = read_staged(spark.spark_session, lakehouse.staging_path, pending, extra)
            # What contract_keys_on_branch expects to find on the branch.
            keys_staged = rows.select(*PRIMARY_KEY).distinct().count()
            try:
                ids = lakehouse_spark.write(rows, table, warehouse=lakehouse.warehouse_root, commit_user=commit_user,
                                            merge_schema=lakehouse.evolve_schema)
            except SchemaError as exc:
                new = [c for c in extra if c not in columns_before]
                if lakehouse.evolve_schema or not new:
                    raise
                raise SchemaError(f"{exc}. The staged events carry {new}, which table {lakehouse.table} "
                                  f"lacks, and the lakehouse resource's evolve_schema is off: turn it on "
                                  f"(LAKEHOUSE_EVOLVE_SCHEMA=true) or add the column with "
                                  f"catalog.alter_table, then run again") from exc
            except PostCommitError as exc:  # the rows are committed; only the compaction after them failed
                context.log.warning(f"snapshot {exc.snapshot_ids} committed the rows, then: {exc}")
                ids = exc.snapshot_ids
            if ids:
                # Re-opened: the write may have evolved the schema.
                level0_up = take_level0_up(lakehouse.get_table().branch_table(branch),
                                           sorted({dt for _, dt, _ in pending}))
            # Not marked written: the rows are on the audit branch only. lsm_publish marks them
            # once main holds this commit; a failed audit leaves them pending for the next run.
    for batch in done:  # committed and recorded: the table holds these rows now
        shutil.rmtree(lakehouse.staging_path / f"batch={batch}", ignore_errors=True)
    table = lakehouse.get_table().branch_table(branch)  # re-opened: the latest schema and snapshot
    snapshot = table.latest_snapshot()
    files = table.files_added(ids)
    files_of = {dt: files.filter(pc.equal(files.column("partition"), partition_name(dt))) for dt in dts}
    live = bucket_rows(table, dts)
    written = written_buckets(files, existed)

    def figures(days: list[str]) -> dict[str, Any]:
        added = [files_of[dt] for dt in days]
        names = {partition_name(d) for d in days}
        return {
            "rows_written": sum(n for _, dt, n in pending if dt in days),
            "files_added": sum(a.num_rows for a in added),
            "records_in_files_added": sum(pc.sum(a.column("row_count")).as_py() or 0 for a in added),
            "bytes_added": sum(pc.sum(a.column("file_size")).as_py() or 0 for a in added),
            # The day's records in live files (before merging): what this partition holds now.
            "dagster/row_count": sum(r.records for r in live if r.partition in names),
            **bucket_metadata([r for r in live if r.partition in names]),
            # What the write did, per bucket: the truth bucket_assignment's plan is measured against.
            "buckets_written": dg.MetadataValue.table(
                [dg.TableRecord(w) for w in written if w["partition"] in names], schema=WRITTEN_TABLE_SCHEMA),
            "new_buckets_written": sum(1 for w in written if w["new"] and w["partition"] in names),
        }

    per_day_metadata(context, {dt: figures([dt]) for dt in dts})
    added = [c for c in table.schema.field_names if c not in columns_before]
    metadata: dict[str, Any] = {
        "audit_branch": branch,
        "branch_base_snapshot": wap.branch_base(main, branch),
        "keys_staged": keys_staged,
        # The commit user of this run's write: lsm_publish (or its re-execution from failure) finds
        # by it whether main holds the batch once the branch is gone.
        "commit_user": commit_user or "none",
        "snapshot_id": snapshot.id if snapshot else 0,
        "schema_id": table.schema.id,
        "columns": ", ".join(table.schema.field_names),
        "columns_added": ", ".join(added) or "none",
        "commit_kind": snapshot.commit_kind if ids and snapshot else "none (nothing staged)",
        # The COMPACT snapshot that took the write's level 0 up and holds its lookup changelog.
        "level0_up_snapshots": ", ".join(map(str, level0_up)) or "none",
        "table_records": snapshot.total_record_count if snapshot else 0,
        "snapshots": len(table.snapshot_manager().list_snapshot_ids()),
        **figures(dts),
    }
    if added:
        context.log.info(f"table {lakehouse.table} gained columns {added} (schema {table.schema.id})")
    context.log.info(f"branch {branch} snapshot {metadata['snapshot_id']}: {metadata['rows_written']:,} rows, "
                     f"{files.num_rows} files added; main publishes them after the audit")
    return dg.MaterializeResult(metadata=metadata)


