"""The LSM side of the table: bucket assignment, the Spark write, and sorted-run compaction.

Also what every asset and check shows of a table's buckets: rows, files and sorted runs per
bucket as a markdown table and a markdown bar chart, with numeric summaries Dagster plots
across materializations. All of it comes from `table.bucket_stats()` (manifests only).
"""

import json
import shutil
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from lakehouse_engine import (
    POSTPONE_BUCKET,
    BucketMode,
    FileStoreTable,
    PostCommitError,
    SchemaError,
)
from lakehouse_engine.options import NUM_SORTED_RUN_COMPACTION_TRIGGER
from lakehouse_engine.spark import TableRef, bucket_column
from pipelines.ingest import (
    DAILY_PARTITIONS,
    EVOLUTION_COLUMNS,
    SINGLE_RUN,
    Ledger,
    ingested_events,
    per_day_metadata,
    read_staged,
)
from pipelines.resources import LakehouseResource, SparkResource
from pipelines.sample_data import PARTITION_KEY

BUCKET = "bucket"
ROWS = "rows"
_CHART_WIDTH = 24  # narrow enough that the UI's metadata panel shows each bar's number unclipped
_CHART_MAX_LINES = 64


# ---- per-bucket statistics and how they are shown ----------------------------------------------
@dataclass(frozen=True)
class BucketRow:
    """One (partition, bucket) of `table.bucket_stats()`."""

    partition: str
    bucket: int
    total_buckets: int
    records: int
    files: int
    sorted_runs: int
    size_bytes: int

    @property
    def label(self) -> str:
        return bucket_label(self.partition, self.bucket)


def bucket_label(partition: str, bucket: int) -> str:
    """`dt=2026-11-21/3`, or `dt=2026-11-21/postpone` for bucket-postpone."""
    return f"{partition}/{'postpone' if bucket == POSTPONE_BUCKET else bucket}"


def partition_name(dt: str) -> str:
    """The table partition of a daily partition key (`2026-11-21` -> `dt=2026-11-21`)."""
    return f"{PARTITION_KEY}={dt}"


def bucket_rows(table: FileStoreTable, dts: Iterable[str] | None = None) -> list[BucketRow]:
    """The table's (partition, bucket) statistics, of the given days only when `dts` is set."""
    stats = table.bucket_stats()
    if dts is not None:
        stats = stats.filter(pc.is_in(stats.column("partition"),
                                      pa.array([partition_name(d) for d in dts])))
    return [BucketRow(r["partition"], r["bucket"], r["total_buckets"], r["record_count"],
                      r["file_count"], r["sorted_runs"], r["size_bytes"]) for r in stats.to_pylist()]


def buckets_markdown(rows: Sequence[BucketRow]) -> str:
    """Rows, files, sorted runs and bytes per bucket as a markdown table."""
    if not rows:
        return "The table has no data files yet."
    lines = ["| partition | bucket | rows | files | sorted runs | bytes |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        bucket = "postpone" if r.bucket == POSTPONE_BUCKET else str(r.bucket)
        lines.append(f"| {r.partition} | {bucket} | {r.records:,} | {r.files} | {r.sorted_runs} | {r.size_bytes:,} |")
    return "\n".join(lines)


BUCKETS_TABLE_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("partition", "string"), dg.TableColumn("bucket", "string"),
    dg.TableColumn("rows", "int", description="records in the bucket's live files, before merging"),
    dg.TableColumn("files", "int"), dg.TableColumn("sorted_runs", "int"),
    dg.TableColumn("bytes", "int")])


def buckets_table(rows: Sequence[BucketRow]) -> dg.TableMetadataValue:
    """Rows, files, sorted runs and bytes per (partition, bucket) as Dagster table metadata."""
    return dg.MetadataValue.table(
        [dg.TableRecord({"partition": r.partition, "bucket": "postpone" if r.bucket == POSTPONE_BUCKET else str(r.bucket),
                         "rows": r.records, "files": r.files, "sorted_runs": r.sorted_runs,
                         "bytes": r.size_bytes}) for r in rows],
        schema=BUCKETS_TABLE_SCHEMA)


def bar_chart_markdown(values: Sequence[tuple[str, int]], unit: str = "rows") -> str:
    """A horizontal bar chart in a markdown code block, one bar per label."""
    if not values:
        return "Nothing to chart."
    top = max(v for _, v in values) or 1
    width = max(len(label) for label, _ in values[:_CHART_MAX_LINES])
    lines = []
    for label, value in values[:_CHART_MAX_LINES]:
        bar = "█" * max(1 if value else 0, round(_CHART_WIDTH * value / top))
        lines.append(f"{label:<{width}}  {bar:<{_CHART_WIDTH}}  {value:,}")
    if len(values) > _CHART_MAX_LINES:
        lines.append(f"... and {len(values) - _CHART_MAX_LINES} more")
    return f"{unit} per bucket\n```\n" + "\n".join(lines) + "\n```"


def skew(records: Sequence[int]) -> float:
    """Largest over mean of the row counts (1.0 when even; 0.0 without rows)."""
    total = sum(records)
    return max(records) * len(records) / total if total else 0.0


def bucket_metadata(rows: Sequence[BucketRow]) -> dict[str, Any]:
    """Rows per bucket as a table and a chart, sorted runs per bucket, and numbers to plot."""
    real = [r for r in rows if r.bucket != POSTPONE_BUCKET]
    counts = [r.records for r in real]
    return {
        "rows_per_bucket": buckets_table(rows),
        "rows_per_bucket_chart": dg.MetadataValue.md(bar_chart_markdown([(r.label, r.records) for r in rows])),
        "sorted_runs_per_bucket": dg.MetadataValue.md(
            bar_chart_markdown([(r.label, r.sorted_runs) for r in rows], unit="sorted runs")),
        "buckets": len(real),
        "max_rows_in_a_bucket": max(counts, default=0),
        "mean_rows_per_bucket": float(round(sum(counts) / len(counts), 1)) if counts else 0.0,
        "bucket_skew": float(round(skew(counts), 3)) if counts else 0.0,
        "max_sorted_runs": max((r.sorted_runs for r in rows), default=0),
        "rows_in_postpone_bucket": sum(r.records for r in rows if r.bucket == POSTPONE_BUCKET),
    }


def buckets_over_trigger(rows: Iterable[BucketRow], trigger: int) -> list[BucketRow]:
    """Real buckets holding more sorted runs than `num-sorted-run.compaction-trigger`."""
    return [r for r in rows if r.bucket != POSTPONE_BUCKET and r.sorted_runs > trigger]


# ---- bucket assignment -------------------------------------------------------------------------
def dynamic_bucket_counts(ref: TableRef, rows: pa.Table) -> pa.Table:
    """Rows per dynamic bucket for rows of one partition: (dt, bucket, rows).

    `table.preview_buckets` runs the engine's assigner over the table's current HASH index
    without writing index files, so it shows where a single-assigner write would put the rows.
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


def assign_buckets(rows: DataFrame, table: FileStoreTable) -> list[tuple[str, int, int]]:
    """(dt, bucket, rows) for rows about to be written, computed on Spark for the table's mode."""
    mode = table.bucket_mode()
    ref = TableRef.of(table)
    if mode is BucketMode.FIXED:
        counted = (rows.groupBy(PARTITION_KEY, bucket_column(rows, table, ref).alias(BUCKET))
                   .agg(F.count(F.lit(1)).alias(ROWS)))
    elif mode.assigns_dynamically:
        def per_partition(group: pa.Table) -> pa.Table:  # Spark reads these type hints
            return dynamic_bucket_counts(ref, group)

        counted = rows.groupBy(PARTITION_KEY).applyInArrow(per_partition, PLAN_SCHEMA)
    else:  # postpone: every row waits in bucket-postpone until postpone compaction
        counted = (rows.groupBy(PARTITION_KEY).agg(F.count(F.lit(1)).alias(ROWS))
                   .select(PARTITION_KEY, F.lit(POSTPONE_BUCKET).alias(BUCKET), ROWS))
    return sorted((r[PARTITION_KEY], int(r[BUCKET]), int(r[ROWS])) for r in counted.collect())


@dg.asset(
    partitions_def=DAILY_PARTITIONS,
    backfill_policy=SINGLE_RUN,
    deps=[ingested_events],
    group_name="lsm",
    kinds={"spark", "paimon"},
    description="The bucket of every staged row for the table's bucket mode (fixed, dynamic or "
                "postpone): rows per bucket and the buckets the write will create.",
)
def bucket_assignment(context: dg.AssetExecutionContext, spark: SparkResource,
                      lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Assign buckets to the staged rows not yet written and record the plan beside the staging."""
    table = lakehouse.get_or_create_table()
    mode = table.bucket_mode()
    pending = Ledger(lakehouse.ledger_path).read().pending(context.partition_keys)
    base: dict[str, Any] = {"bucket_mode": mode.value, "table_buckets_option": table.options.bucket}
    if not pending:
        return dg.MaterializeResult(metadata={**base, "rows": 0, "new_buckets": 0,
                                              "dagster/row_count": 0})
    plan = assign_buckets(read_staged(spark.spark_session, lakehouse.staging_path, pending), table)
    existing = {(r.partition, r.bucket) for r in bucket_rows(table, context.partition_keys)}
    new = [(dt, b) for dt, b, _ in plan if (partition_name(dt), b) not in existing and b != POSTPONE_BUCKET]
    # One file per run's days, replaced by the next plan of those days: the folder stays bounded.
    days = sorted(context.partition_keys)
    path = lakehouse.staging_path / "bucket_plans" / f"{days[0]}_{days[-1]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"bucket_mode": mode.value, "buckets": [
        {"dt": dt, "bucket": b, "rows": n, "new": (dt, b) in new} for dt, b, n in plan]}, indent=1))
    def figures(part: list[tuple[str, int, int]]) -> dict[str, Any]:
        counts = [n for _, _, n in part]
        fresh = [(dt, b) for dt, b, _ in part if (dt, b) in new]
        return {
            "rows": sum(counts),
            "dagster/row_count": sum(counts),
            "buckets_assigned": len(part),
            "new_buckets": len(fresh),
            "new_bucket_list": ", ".join(bucket_label(partition_name(dt), b) for dt, b in fresh) or "none",
            "rows_per_bucket": dg.MetadataValue.table(
                [dg.TableRecord({"partition": partition_name(dt), "bucket": str(b), "rows": n,
                                 "new": (dt, b) in new}) for dt, b, n in part],
                schema=PLAN_TABLE_SCHEMA),
            "rows_per_bucket_chart": dg.MetadataValue.md(
                bar_chart_markdown([(bucket_label(partition_name(dt), b), n) for dt, b, n in part])),
            "bucket_skew": float(round(skew(counts), 3)),
        }

    per_day_metadata(context, {dt: figures([p for p in plan if p[0] == dt]) for dt in {p[0] for p in plan}})
    context.log.info(f"{sum(n for _, _, n in plan):,} rows into {len(plan)} buckets ({mode.value}), {len(new)} new")
    return dg.MaterializeResult(metadata={**base, **figures(plan), "plan": dg.MetadataValue.path(str(path))})


# ---- the LSM write -----------------------------------------------------------------------------
@dg.asset(
    partitions_def=DAILY_PARTITIONS,
    backfill_policy=SINGLE_RUN,
    deps=[bucket_assignment],
    group_name="lsm",
    kinds={"spark", "paimon"},
    description="The Paimon primary-key table: staged rows written by Spark, one commit per run, "
                "one new level-0 sorted run per bucket written; an evolution column the staged "
                "rows carry is added to the table first (the lakehouse resource's evolve_schema).",
)
def lsm_write(context: dg.AssetExecutionContext, spark: SparkResource,
              lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Write the staged, uncommitted rows of the run's days in one Spark commit."""
    import lakehouse_engine.spark as lakehouse_spark

    table = lakehouse.get_or_create_table()
    columns_before = table.schema.field_names
    dts = list(context.partition_keys)
    done: list[str] = []
    ledger = Ledger(lakehouse.ledger_path)
    with ledger.update() as state:
        pending = state.pending(dts)
        ids: list[int] = []
        # Rows an interrupted run committed, though it did not live to record it: never twice.
        for user, entries in state.committing_users(pending).items():
            landed = table.committed_snapshots(user)
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
            try:
                ids = lakehouse_spark.write(rows, table, warehouse=lakehouse.warehouse, commit_user=commit_user,
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
            done += state.mark_written(pending, ids[-1] if ids else 0)
    for batch in done:  # committed and recorded: the table holds these rows now
        shutil.rmtree(lakehouse.staging_path / f"batch={batch}", ignore_errors=True)
    table = lakehouse.get_table()  # re-opened: the latest schema and snapshot
    snapshot = table.latest_snapshot()
    files = table.files_added(ids)
    files_of = {dt: files.filter(pc.equal(files.column("partition"), partition_name(dt))) for dt in dts}
    live = bucket_rows(table, dts)

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
        }

    per_day_metadata(context, {dt: figures([dt]) for dt in dts})
    added = [c for c in table.schema.field_names if c not in columns_before]
    metadata: dict[str, Any] = {
        "snapshot_id": snapshot.id if snapshot else 0,
        "schema_id": table.schema.id,
        "columns": ", ".join(table.schema.field_names),
        "columns_added": ", ".join(added) or "none",
        "commit_kind": snapshot.commit_kind if ids and snapshot else "none (nothing staged)",
        "table_records": snapshot.total_record_count if snapshot else 0,
        "snapshots": len(table.snapshot_manager().list_snapshot_ids()),
        **figures(dts),
    }
    if added:
        context.log.info(f"table {lakehouse.table} gained columns {added} (schema {table.schema.id})")
    context.log.info(f"snapshot {metadata['snapshot_id']}: {metadata['rows_written']:,} rows, "
                     f"{files.num_rows} files added")
    return dg.MaterializeResult(metadata=metadata)


# ---- sorted-run compaction ----------------------------------------------------------------------
class BucketTarget(dg.Config):
    """One bucket to compact: its partition (`dt=2026-11-21`) and bucket number."""

    partition: str
    bucket: int


class CompactionConfig(dg.Config):
    """What to compact: `full` rewrites every bucket into one sorted run; otherwise the buckets
    in `targets`, or with no targets every bucket over `num-sorted-run.compaction-trigger`."""

    full: bool = False
    targets: list[BucketTarget] = []


def compact_buckets(spark: SparkSession, table: FileStoreTable, buckets: set[tuple[str, int]] | None,
                    full: bool = False) -> list[int]:
    """Compact these (partition, bucket)s (all when None) on Spark executors and commit once.

    Partitions are named as `bucket_rows` names them (`dt=2026-11-21`); those the table has are
    turned back into partition values (`{"dt": "2026-11-21"}`) for `lakehouse_engine.spark.compact`.
    """
    from lakehouse_engine.spark import compact

    if buckets is None:
        return compact(spark, table, full=full)
    live = {r.partition for r in bucket_rows(table)}
    wanted = [({PARTITION_KEY: name.removeprefix(f"{PARTITION_KEY}=")}, bucket)
              for name, bucket in sorted(buckets) if name in live]
    return compact(spark, table, full=full, buckets=wanted) if wanted else []


@dg.asset(
    # Table-wide, one run anyway; the policy lets `dagster asset materialize --partition-range`
    # select it together with the daily assets (the CLI requires it of every selected asset).
    backfill_policy=SINGLE_RUN,
    deps=[lsm_write],
    group_name="lsm",
    kinds={"spark", "paimon"},
    description="Universal compaction of the buckets whose sorted runs passed the trigger (or a "
                "full compaction of every bucket), on Spark executors, one COMPACT commit.",
)
def sorted_run_compaction(context: dg.AssetExecutionContext, config: CompactionConfig,
                          spark: SparkResource, lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Compact the requested buckets (the sensor names them), or every bucket over the trigger."""
    if not lakehouse.table_exists():
        return dg.MaterializeResult(metadata={"buckets_compacted": 0, "note": "the table does not exist yet"})
    table = lakehouse.get_table()
    trigger = table.options.require(NUM_SORTED_RUN_COMPACTION_TRIGGER)
    before = {(r.partition, r.bucket): r for r in bucket_rows(table)}
    wanted: set[tuple[str, int]] | None
    if config.full:
        wanted = None
    elif config.targets:
        wanted = {(t.partition, t.bucket) for t in config.targets}
    else:
        wanted = {(r.partition, r.bucket) for r in buckets_over_trigger(before.values(), trigger)}
    ids = compact_buckets(spark.spark_session, table, wanted, config.full) if wanted is None or wanted else []
    table = lakehouse.get_table()
    after = {(r.partition, r.bucket): r for r in bucket_rows(table)}
    changed = sorted(k for k in after if k not in before or after[k].files != before[k].files
                     or after[k].sorted_runs != before[k].sorted_runs)
    lines = ["| partition | bucket | sorted runs | files | rows in files |", "|---|---:|---|---|---|"]
    for key in changed:
        b, a = before.get(key), after[key]
        lines.append(f"| {key[0]} | {key[1]} | {b.sorted_runs if b else 0} → {a.sorted_runs} | "
                     f"{b.files if b else 0} → {a.files} | {b.records if b else 0:,} → {a.records:,} |")
    snapshot = table.latest_snapshot()
    context.log.info(f"compacted {len(changed)} buckets (trigger {trigger}); snapshots {ids}")
    return dg.MaterializeResult(metadata={
        "snapshot_id": snapshot.id if snapshot else 0,
        "compaction": "full" if config.full else "universal",
        "compaction_trigger": trigger,
        "buckets_requested": len(before) if wanted is None else len(wanted),
        "buckets_compacted": len(changed),
        "compacted": dg.MetadataValue.md("\n".join(lines) if changed else "Nothing to compact."),
        "snapshots_committed": ", ".join(map(str, ids)) or "none",
        **bucket_metadata(list(after.values())),
    })

