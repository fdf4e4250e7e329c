"""The conditions the asset checks test, as pure functions over what the engine reports
(`*_result`), and the check every committing asset carries (`row_counts_check`).

The concerns' `checks.py` modules wrap them as Dagster checks on their assets. The ERROR checks
are blocking: in a run that also materializes a downstream asset, that asset does not start when
the check fails. Bucket skew only warns.
"""


from collections.abc import Sequence
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine import POSTPONE_BUCKET, FileStoreTable, Snapshot
from lakehouse_engine.options import DYNAMIC_BUCKET_TARGET_ROW_NUM
from pipelines.lib import keys, wap
from pipelines.lib.bucket_report import BucketRow, bucket_rows, buckets_markdown, skew
from pipelines.lib.events import PRIMARY_KEY
from pipelines.lib.resources import LakehouseResource
from pipelines.lib.runs import run_carrying

MAX_BUCKET_SKEW = 2.0            # largest bucket over the mean bucket of a partition
MIN_ROWS_FOR_SKEW = 1_000        # smaller partitions are too small for the ratio to mean much
MAX_DUPLICATES_SHOWN = 10
NO_SNAPSHOT = "the table has no snapshot yet"


def lsm_write_ran_in(instance: dg.DagsterInstance, run_id: str) -> bool:
    """Whether `lsm_write` materialized in run `run_id` (for any of its days)."""
    return any(event.asset_materialization is not None and event.asset_materialization.asset_key == keys.LSM_WRITE
               for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION))


def written_run(instance: dg.DagsterInstance, run_id: str) -> str:
    """The run whose `lsm_write` (and audit branch) run `run_id` audits and publishes: itself, or
    for a re-execution from failure that did not run `lsm_write` again, the earlier run of its
    chain that did (its branch holds the batch the failed run should have published)."""
    return run_carrying(instance, run_id, lambda rid: lsm_write_ran_in(instance, rid))


def lsm_write_metadata(instance: dg.DagsterInstance, run_id: str) -> list[dict[str, Any]]:
    """The metadata values of each of `lsm_write`'s materializations in run `run_id`."""
    found = []
    for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        mat = event.asset_materialization
        if mat is not None and mat.asset_key == keys.LSM_WRITE:
            found.append({k: getattr(v, "value", v) for k, v in mat.metadata.items()})
    return found


def rows_written_in_run(context: dg.AssetCheckExecutionContext) -> int | None:
    """Rows lsm_write reported written in the run the check audits (`written_run`: its own, or
    the one a re-execution from failure carries on; summed over its days); None when lsm_write
    did not materialize there (the check was asked for on its own)."""
    events = context.instance.all_logs(written_run(context.instance, context.run.run_id),
                                       of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    written = None
    for event in events:
        mat = event.asset_materialization
        if mat is not None and mat.asset_key == keys.LSM_WRITE:
            value = mat.metadata.get("rows_written")
            written = (written or 0) + int(getattr(value, "value", value) or 0)
    return written


def audited_table(lakehouse: LakehouseResource, run_id: str | None) -> FileStoreTable:
    """The table a check of run `run_id` reads: the run's audit branch while it is open
    (write-audit-publish), else main."""
    table = lakehouse.get_table()
    if run_id is not None:
        branch = wap.audit_branch_name(run_id)
        if branch in table.list_branches():
            return table.branch_table(branch)
    return table


def keys_staged_in_run(context: dg.AssetCheckExecutionContext) -> int | None:
    """Distinct primary keys among the contract-valid rows lsm_write read from staging in the
    run the check audits (`keys_staged`; `written_run`); None when lsm_write did not materialize
    there."""
    events = context.instance.all_logs(written_run(context.instance, context.run.run_id),
                                       of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    found = None
    for event in events:
        mat = event.asset_materialization
        if mat is not None and mat.asset_key == keys.LSM_WRITE and "keys_staged" in mat.metadata:
            value = mat.metadata["keys_staged"]
            found = int(getattr(value, "value", value) or 0)
    return found


def latest_snapshot_of(lakehouse: LakehouseResource,
                       run_id: str | None = None) -> tuple[FileStoreTable, Snapshot] | None:
    """The table (the run's audit branch if open, else main) and its latest snapshot; None when
    there is no table or no snapshot."""
    if not lakehouse.table_exists():
        return None
    table = audited_table(lakehouse, run_id)
    snapshot = table.latest_snapshot()
    return (table, snapshot) if snapshot is not None else None


# ---- the conditions ------------------------------------------------------------------------
def row_counts_result(rows: Sequence[BucketRow], snapshot: Snapshot) -> dg.AssetCheckResult:
    """Rows per bucket (from the manifests' files) add up to the snapshot's record count."""
    total = sum(r.records for r in rows)
    return dg.AssetCheckResult(
        passed=total == snapshot.total_record_count,
        description=None if total == snapshot.total_record_count else
        f"buckets hold {total:,} rows in files but snapshot {snapshot.id} counts {snapshot.total_record_count:,}",
        metadata={"snapshot_id": snapshot.id, "rows_in_buckets": total,
                  "snapshot_record_count": snapshot.total_record_count, "buckets": len(rows),
                  "difference": total - snapshot.total_record_count})


def dynamic_target_result(keys_per_bucket: dict[tuple[str, int], int], target: int) -> dg.AssetCheckResult:
    """No dynamic bucket holds more keys than `dynamic-bucket.target-row-num`."""
    over = sorted((k, n) for k, n in keys_per_bucket.items() if n > target)
    lines = ["| partition | bucket | keys |", "|---|---:|---:|"] + [f"| {p} | {b} | {n:,} |" for (p, b), n in over]
    return dg.AssetCheckResult(
        passed=not over,
        description=f"{len(over)} buckets hold more than {target:,} keys" if over else None,
        metadata={"target_row_num": target, "buckets": len(keys_per_bucket), "buckets_over_target": len(over),
                  "max_keys_in_a_bucket": max(keys_per_bucket.values(), default=0),
                  "over_target": dg.MetadataValue.md("\n".join(lines) if over else "none")})


def postpone_empty_result(rows: Sequence[BucketRow]) -> dg.AssetCheckResult:
    """No row is left in bucket-postpone."""
    waiting = [r for r in rows if r.bucket == POSTPONE_BUCKET]
    left = sum(r.records for r in waiting)
    return dg.AssetCheckResult(
        passed=not waiting,
        description=f"{left:,} rows in {len(waiting)} partitions still wait in bucket-postpone" if waiting else None,
        metadata={"rows_in_postpone_bucket": left, "partitions_with_postponed_rows": len(waiting),
                  "postponed": dg.MetadataValue.md(buckets_markdown(waiting) if waiting else "none")})


def skew_result(rows: Sequence[BucketRow], threshold: float = MAX_BUCKET_SKEW,
                min_rows: int = MIN_ROWS_FOR_SKEW) -> dg.AssetCheckResult:
    """In every partition of at least `min_rows` rows, the largest bucket over the mean stays under
    `threshold` (WARN: a skewed bucket is slow, not wrong)."""
    per_partition: dict[str, list[int]] = {}
    for r in rows:
        if r.bucket != POSTPONE_BUCKET:
            per_partition.setdefault(r.partition, []).append(r.records)
    ratios = {p: skew(c) for p, c in per_partition.items() if sum(c) >= min_rows}
    worst = max(ratios.items(), key=lambda kv: kv[1], default=("", 0.0))
    over = {p: s for p, s in ratios.items() if s >= threshold}
    return dg.AssetCheckResult(
        passed=not over,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{len(over)} partitions have a bucket at {worst[1]:.2f}x the mean (threshold {threshold})"
        if over else None,
        metadata={"threshold": threshold, "max_skew": float(round(worst[1], 3)),
                  "most_skewed_partition": worst[0] or "none", "partitions_checked": len(ratios),
                  "partitions_over_threshold": len(over)})


def duplicates_result(duplicates: Sequence[dict[str, Any]], checked_partitions: str) -> dg.AssetCheckResult:
    """No primary key appears twice in a merged read."""
    lines = ["| " + " | ".join(PRIMARY_KEY) + " | copies |", "|" + "---|" * (len(PRIMARY_KEY) + 1)]
    lines += ["| " + " | ".join(str(d[k]) for k in PRIMARY_KEY) + f" | {d['count']} |"
              for d in duplicates[:MAX_DUPLICATES_SHOWN]]
    return dg.AssetCheckResult(
        passed=not duplicates,
        description=f"{len(duplicates)} primary keys appear more than once" if duplicates else None,
        metadata={"duplicate_keys": len(duplicates), "partitions_checked": checked_partitions,
                  "examples": dg.MetadataValue.md("\n".join(lines) if duplicates else "none")})


def batch_keys(main: FileStoreTable, branch: FileStoreTable) -> pa.Table:
    """The distinct primary keys of the records an audit branch's batch added since its base."""
    head = branch.latest_snapshot()
    base = wap.branch_base(main, branch.branch)
    if head is None or head.id <= base:
        return pa.table({k: pa.array([], pa.string()) for k in PRIMARY_KEY})
    records = branch.changes(base, head.id, mode="delta")
    return records.select(list(PRIMARY_KEY)).group_by(list(PRIMARY_KEY)).aggregate([])


def recheck_rebased(main: FileStoreTable, rebased: FileStoreTable, audited: FileStoreTable) -> list[str]:
    """The blocking audit's conditions on a batch rebased onto main's latest snapshot, which
    lsm_publish tests before publishing it: row counts per bucket, no duplicate primary key (an
    engine read), the dynamic-bucket target, and the batch's keys are the audited batch's; what
    failed, one line each (empty: passed)."""
    head = rebased.latest_snapshot()
    if head is None:
        return [f"branch {rebased.branch} has no snapshot"]
    results = {"bucket_row_counts_match_snapshot": row_counts_result(bucket_rows(rebased), head)}
    rb = rebased.new_read_builder().with_projection(list(PRIMARY_KEY))
    keys = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    counted = keys.group_by(list(PRIMARY_KEY)).aggregate([([], "count_all")])
    dups = counted.filter(pc.greater(counted.column("count_all"), 1)).rename_columns([*PRIMARY_KEY, "count"])
    results["no_duplicate_primary_key"] = duplicates_result(dups.slice(0, 1_000).to_pylist(), "all")
    if rebased.bucket_mode().assigns_dynamically:
        per_bucket = {(r["partition"], r["bucket"]): r["row_count"]
                      for r in rebased.index_stats(head.id).to_pylist() if r["index_type"] == "HASH"}
        results["dynamic_buckets_within_target"] = dynamic_target_result(
            per_bucket, rebased.options.require(DYNAMIC_BUCKET_TARGET_ROW_NUM))
    ours, audited_keys = (batch_keys(main, t).sort_by([(k, "ascending") for k in PRIMARY_KEY])
                          for t in (rebased, audited))
    same = ours.num_rows == audited_keys.num_rows and ours.cast(audited_keys.schema).equals(audited_keys)
    results["contract_keys_on_branch"] = dg.AssetCheckResult(
        passed=same, description=None if same else
        f"the rebased batch holds {ours.num_rows:,} keys, the audited one {audited_keys.num_rows:,}")
    return [f"{name}: {r.description or 'failed'}" for name, r in results.items() if not r.passed]


def passed_empty(note: str = NO_SNAPSHOT) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True, metadata={"note": note})


# ---- the check every committing asset carries ----------------------------------------------
def row_counts_check(asset: dg.AssetKey, audited: bool = False) -> dg.AssetChecksDefinition:
    """`bucket_row_counts_match_snapshot` on one asset (blocking); `audited`: on the run's audit
    branch while it is open."""

    @dg.asset_check(asset=asset, name="bucket_row_counts_match_snapshot", blocking=True,
                    description="Rows per bucket in the manifests add up to the snapshot's record count"
                                + (" (on the run's audit branch)." if audited else "."))
    def _check(context: dg.AssetCheckExecutionContext, lakehouse: LakehouseResource) -> dg.AssetCheckResult:
        latest = latest_snapshot_of(lakehouse, written_run(context.instance, context.run.run_id) if audited else None)
        if latest is None:
            return passed_empty()
        table, snapshot = latest
        return row_counts_result(bucket_rows(table), snapshot)

    return _check
