"""Table maintenance after the write: postpone-bucket compaction, rescale, snapshot expiry.

These run on the driver with the engine: each is a metadata-heavy, single-commit procedure that
never starts Spark. Each holds the table's pool; expiry runs nightly by a declarative
`AutomationCondition.on_cron`, right after the nightly full compaction.
"""

import math
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_engine import POSTPONE_BUCKET, BucketMode
from pipelines.lib import keys
from pipelines.lib.bucket_report import (
    BucketRow,
    bucket_metadata,
    bucket_rows,
    by_bucket,
    changes_markdown,
)
from pipelines.lib.partitions import SINGLE_RUN, partition_name, partition_values
from pipelines.lib.resources import DEFAULT_TABLE, LakehouseResource, table_pool

TABLE_POOL = table_pool(DEFAULT_TABLE)
# The nightly full compaction's tick: expiry follows it the same night (see snapshot_expiry).
SNAPSHOT_EXPIRY_CRON = "0 2 * * *"

GIB = 1 << 30
_HOUR_MS = 3_600_000


def _absent() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"note": "the table does not exist yet"})


# ---- postpone-bucket compaction ------------------------------------------------------------
@dg.asset(
    # Table-wide, one run anyway; the policy lets `dagster asset materialize --partition-range`
    # select it together with the daily assets (the CLI requires it of every selected asset).
    backfill_policy=SINGLE_RUN,
    deps=[keys.LSM_PUBLISH],
    pool=TABLE_POOL,
    group_name="maintenance",
    kinds={"paimon"},
    description="Rows of a postpone-bucket table ('bucket' = -2) moved from bucket-postpone into "
                "real buckets (the partition's count, or postpone.default-bucket-num), one COMPACT commit.",
)
def postpone_compaction(context: dg.AssetExecutionContext, lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Move every postponed row into its bucket; nothing to do for other bucket modes."""
    if not lakehouse.table_exists():
        return _absent()
    table = lakehouse.get_table()
    mode = table.bucket_mode()
    if mode is not BucketMode.POSTPONE:
        return dg.MaterializeResult(metadata={
            "bucket_mode": mode.value, "rows_moved": 0,
            "note": "only postpone-bucket tables ('bucket' = -2) have rows to move"})
    before = bucket_rows(table)
    waiting = [r for r in before if r.bucket == POSTPONE_BUCKET]
    ids = table.compact_postpone()
    table = lakehouse.get_table()
    after = bucket_rows(table)
    latest = table.latest_snapshot()
    had = {(r.partition, r.bucket) for r in before}
    created = sorted((r.partition, r.bucket) for r in after if (r.partition, r.bucket) not in had)
    context.log.info(f"moved {sum(r.records for r in waiting):,} rows from {len(waiting)} partitions; "
                     f"{len(created)} buckets created")
    return dg.MaterializeResult(metadata={
        "bucket_mode": mode.value,
        "snapshot_id": latest.id if latest else 0,
        "snapshots_committed": ", ".join(map(str, ids)) or "none",
        "rows_moved": sum(r.records for r in waiting),
        "files_moved": sum(r.files for r in waiting),
        "partitions_moved": len(waiting),
        "buckets_created": len(created),
        "bucket_list": ", ".join(f"{p}/{b}" for p, b in created) or "none",
        "bucket_changes": dg.MetadataValue.md(changes_markdown(by_bucket(before), by_bucket(after))),
        **bucket_metadata(after),
    })


# ---- rescale ------------------------------------------------------------------------------
@dataclass(frozen=True)
class BucketAdvice:
    """The bucket count the advisor proposes for one partition: about one target size per bucket."""

    partition: str
    buckets: int
    size_bytes: int
    records: int
    advised: int


def advise_bucket_counts(rows: list[BucketRow], target_bucket_bytes: int = GIB) -> list[BucketAdvice]:
    """Per partition, `ceil(bytes / target)` buckets (at least one) for its live data files.

    Bytes are those of the files as they are: before a full compaction they include versions of a
    key that merging would drop, so the advice errs towards more buckets.
    """
    groups: dict[str, list[BucketRow]] = defaultdict(list)
    for r in rows:
        if r.bucket != POSTPONE_BUCKET:
            groups[r.partition].append(r)
    advice = []
    for partition, members in sorted(groups.items()):
        size = sum(r.size_bytes for r in members)
        advice.append(BucketAdvice(partition, members[0].total_buckets, size,
                                   sum(r.records for r in members), max(1, math.ceil(size / target_bucket_bytes))))
    return advice


class RescaleConfig(dg.Config):
    """`bucket_num` rescales the chosen partitions to that count; `apply_advice` rescales each to the
    advisor's count; neither only reports the advice. `partitions` are days (all when empty)."""

    bucket_num: int | None = None
    partitions: list[str] = []
    apply_advice: bool = False
    target_bucket_bytes: int = GIB


def _advice_markdown(advice: list[BucketAdvice], targets: dict[str, int]) -> str:
    if not advice:
        return "The table has no bucketed data yet."
    lines = ["| partition | buckets | bytes | rows in files | advised | action |", "|---|---:|---:|---:|---:|---|"]
    for a in advice:
        action = f"rescaled to {targets[a.partition]}" if a.partition in targets else "kept"
        lines.append(f"| {a.partition} | {a.buckets} | {a.size_bytes:,} | {a.records:,} | {a.advised} | {action} |")
    return "\n".join(lines)


@dg.asset(
    # Table-wide, one run anyway; the policy lets `dagster asset materialize --partition-range`
    # select it together with the daily assets (the CLI requires it of every selected asset).
    backfill_policy=SINGLE_RUN,
    deps=[keys.POSTPONE_COMPACTION],
    pool=TABLE_POOL,
    group_name="maintenance",
    kinds={"paimon"},
    description="Bucket counts per partition: an advisor proposes one bucket per ~1 GB of data; "
                "a configured target (or the advice) is applied with rescale (one OVERWRITE commit).",
)
def rescale(context: dg.AssetExecutionContext, config: RescaleConfig,
            lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Report the advice and rescale the partitions the config asks for."""
    if not lakehouse.table_exists():
        return _absent()
    table = lakehouse.get_table()
    mode = table.bucket_mode()
    before = bucket_rows(table)
    advice = advise_bucket_counts(before, config.target_bucket_bytes)
    chosen = {partition_name(d) for d in config.partitions}
    targets: dict[str, int] = {}
    if mode.assigns_dynamically:
        context.log.info("dynamic bucket tables grow by dynamic-bucket.target-row-num; nothing to rescale")
    elif config.bucket_num is not None or config.apply_advice:
        wanted = {a.partition: a.advised if config.bucket_num is None else config.bucket_num for a in advice
                  if not chosen or a.partition in chosen}
        targets = {a.partition: wanted[a.partition] for a in advice
                   if a.partition in wanted and a.buckets != wanted[a.partition]}
    by_count: dict[int, list[dict[str, str]]] = defaultdict(list)
    for partition, count in sorted(targets.items()):
        by_count[count].append(partition_values(partition))
    ids: list[int] = []
    for count, partitions in sorted(by_count.items()):
        ids += table.rescale(count, partitions)
    table = lakehouse.get_table()
    snapshot = table.latest_snapshot()
    after = bucket_rows(table)
    context.log.info(f"rescaled {len(targets)} partitions; snapshots {ids}")
    return dg.MaterializeResult(metadata={
        "bucket_mode": mode.value,
        "snapshot_id": snapshot.id if snapshot else 0,
        "partitions_rescaled": len(targets),
        "advice": dg.MetadataValue.md(_advice_markdown(advice, targets)),
        "target_bucket_bytes": config.target_bucket_bytes,
        "partitions_off_advice": sum(1 for a in advice if a.buckets != a.advised and a.partition not in targets),
        "snapshots_committed": ", ".join(map(str, ids)) or "none",
        "bucket_changes": dg.MetadataValue.md(changes_markdown(by_bucket(before), by_bucket(after))),
        **bucket_metadata(after),
    })


# ---- snapshot expiry and orphan files -------------------------------------------------------
class ExpiryConfig(dg.Config):
    """Unset retention comes from the table's `snapshot.*` options. Orphans are files no snapshot
    or tag references, older than `orphan_older_than_hours` (a younger one may be a write in flight)."""

    retain_max: int | None = None
    retain_min: int | None = None
    older_than_hours: float | None = None
    remove_orphans: bool = True
    orphan_older_than_hours: float = 24.0


@dg.asset(
    # Table-wide, one run anyway; the policy lets `dagster asset materialize --partition-range`
    # select it together with the daily assets (the CLI requires it of every selected asset).
    backfill_policy=SINGLE_RUN,
    deps=[keys.RESCALE, keys.SORTED_RUN_COMPACTION, keys.FULL_COMPACTION, keys.DAILY_REVENUE_PUBLISH],
    pool=TABLE_POOL,
    # The full compaction's daily tick (02:00 UTC): once full_compaction has run after it (or is
    # requested in the same evaluation: one run does both), expiry runs, and the snapshots the
    # compaction replaced expire with it. Rescale and the sensor's compactions do not hold it back.
    automation_condition=dg.AutomationCondition.on_cron(SNAPSHOT_EXPIRY_CRON, "UTC").allow(
        dg.AssetSelection.assets(keys.FULL_COMPACTION)),
    group_name="maintenance",
    kinds={"paimon"},
    description="Snapshots expired by the table's retention (and the files only they used), then "
                "orphan files removed. Once a day, right after the full compaction (on_cron, 02:00 UTC tick).",
)
def snapshot_expiry(context: dg.AssetExecutionContext, config: ExpiryConfig,
                    lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Expire old snapshots, then remove orphan files."""
    if not lakehouse.table_exists():
        return _absent()
    table = lakehouse.get_table()
    now_ms = int(time.time() * 1000)
    older_than = None if config.older_than_hours is None else now_ms - int(config.older_than_hours * _HOUR_MS)
    expired = table.expire_snapshots(retain_max=config.retain_max, retain_min=config.retain_min,
                                     older_than=older_than)
    orphans: list[str] = []
    if config.remove_orphans:
        orphans = table.remove_orphan_files(older_than=now_ms - int(config.orphan_older_than_hours * _HOUR_MS))
    after = table.snapshot_manager().list_snapshot_ids()  # a listing: no snapshot file is read
    shown = "\n".join(f"- `{p}`" for p in orphans[:20])
    if len(orphans) > 20:
        shown += f"\n- ... and {len(orphans) - 20} more"
    context.log.info(f"expired {expired} snapshots, removed {len(orphans)} orphan files")
    metadata: dict[str, Any] = {
        "snapshots_expired": expired,
        "snapshots_before": len(after) + expired,
        "snapshots_retained": len(after),
        "earliest_snapshot": after[0] if after else 0,
        "latest_snapshot": after[-1] if after else 0,
        "orphan_files_removed": len(orphans),
        "orphan_files": dg.MetadataValue.md(shown or "No orphan files."),
    }
    return dg.MaterializeResult(metadata=metadata)
