"""What `make run` prints after the job: each asset's figures, the checks, the table's three row
numbers with what each means, and the commands to run next."""

from __future__ import annotations

import shlex
from collections import defaultdict
from typing import Any

import pyarrow as pa

from pipelines.lib.events import PARTITION_KEY

# Figures a per-day materialization carries for its own day: the run's figure is their sum.
SUMMED = frozenset({"new_files", "rows_staged", "rows_quarantined", "rows", "rows_written", "files_added",
                    "records_in_files_added", "buckets_assigned", "new_buckets", "new_buckets_written"})

SHOWN = {
    "ingested_events": ("new_files", "rows_staged", "rows_quarantined", "evolution_columns"),
    "bucket_assignment": ("bucket_mode", "assignment", "rows", "buckets_assigned", "new_buckets"),
    "lsm_write": ("audit_branch", "branch_base_snapshot", "snapshot_id", "commit_kind", "rows_written", "files_added", "new_buckets_written",
                  "max_sorted_runs", "bucket_skew", "schema_id", "columns_added"),
    "lsm_publish": ("published", "rebased", "main_snapshot_before", "main_snapshot_id", "snapshots_published"),
    "daily_revenue": ("mode", "snapshot_range", "changes", "changes_insert", "changes_update_before",
                      "changes_update_after", "changes_delete", "groups_changed", "total_orders"),
    "daily_revenue_publish": ("published", "rebased", "main_snapshot_before", "main_snapshot_id",
                              "consumer_next_snapshot"),
    "sorted_run_compaction": ("buckets_compacted", "compaction_trigger", "max_sorted_runs"),
    "full_compaction": ("buckets_compacted", "max_sorted_runs"),
    "postpone_compaction": ("bucket_mode", "rows_moved"),
    "rescale": ("partitions_rescaled", "buckets"),
    "snapshot_expiry": ("snapshots_expired", "snapshots_retained", "orphan_files_removed"),
}


def _value(entry: Any) -> Any:
    return getattr(entry, "value", entry)


def _text(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def run_figures(result: Any) -> dict[str, dict[str, Any]]:
    """Per asset, its run's figures: per-day counts summed over the days, other values as last reported."""
    per_asset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        per_asset[mat.asset_key.to_user_string()].append({k: _value(v) for k, v in mat.metadata.items()})
    figures: dict[str, dict[str, Any]] = {}
    for name, reports in per_asset.items():
        merged = dict(reports[-1])
        for key in SUMMED:
            values = [r[key] for r in reports if isinstance(r.get(key), int)]
            if values and len(reports) > 1:
                merged[key] = sum(values)
        merged["days"] = len(reports)
        figures[name] = merged
    return figures


def print_summary(result: Any) -> bool:
    """Print what each asset and check reported; True when no ERROR check failed."""
    seen = run_figures(result)
    print("\nassets (figures summed over the run's days)")
    for name, keys in SHOWN.items():
        if name not in seen:
            print(f"  {name:<23} not materialized")
            continue
        print(f"  {name:<23} " + ", ".join(f"{k}={_text(seen[name][k])}" for k in keys if k in seen[name]))
        if name == "ingested_events":
            for reason, n in (seen[name].get("quarantine_reason_counts") or {}).items():
                print(f"  {'':<23}   quarantined {n:,} x {reason}")
        if name == "rescale" and seen[name].get("partitions_off_advice"):
            print(f"  {'':<23}   advice (not an error): {seen[name]['partitions_off_advice']} partitions would "
                  f"fit another bucket count (about 1 GiB per bucket); the rescale asset's `advice` table "
                  f"lists them, and its config `apply_advice: true` applies it")
    ok = True
    passed = 0
    print("\nasset checks")
    for evaluation in result.get_asset_check_evaluations():
        key = evaluation.asset_check_key
        if evaluation.passed:
            passed += 1
            continue
        if evaluation.severity.value == "ERROR":
            ok = False
        detail = evaluation.description or ", ".join(
            f"{k}={_text(_value(v))}" for k, v in list(evaluation.metadata.items())[:3])
        print(f"  {key.asset_key.to_user_string() + ':' + key.name:<58} FAILED ({evaluation.severity.value})"
              f"  {detail}")
    print(f"  {passed} passed")
    return ok


def print_table(warehouse: str, table_name: str, result: Any,
                catalog_options: dict[str, str] | None = None) -> pa.Table:
    """Where the table is and its three row numbers, each with what it means; returns the merged rows."""
    from lakehouse_engine import Catalog

    table = Catalog(warehouse, catalog_options or {}).get_table(table_name)
    stats = table.bucket_stats()
    snapshot = table.latest_snapshot()
    rb = table.new_read_builder()
    merged = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    written = run_figures(result).get("lsm_write", {}).get("rows_written", 0)
    in_files = sum(stats.column("record_count").to_pylist())
    partitions = len(set(stats.column("partition").to_pylist()))
    runs = max(stats.column("sorted_runs").to_pylist(), default=0)
    print(f"\ntable {table.name} at {table.path} (snapshot {snapshot.id if snapshot else 0}, "
          f"{stats.num_rows} buckets in {partitions} partitions, most sorted runs in a bucket: {runs})")
    width = len(f"{max(written, in_files, merged.num_rows):,}")
    print(f"  {written:>{width},}  events this run wrote (each valid landed record: an insert, update or delete)")
    print(f"  {in_files:>{width},}  records in the table's live files (a write keeps the last event per key of"
          f" its own rows; across writes every version stays until compaction merges them)")
    print(f"  {merged.num_rows:>{width},}  rows a reader sees (one per order_id and {PARTITION_KEY}: "
          f"the newest event wins, deleted orders are gone)")
    return merged


def print_next_steps(warehouse: str, table: str, catalog_options: dict[str, str] | None = None) -> None:
    """The commands a person runs next (an object store's options as `--option`, credentials left
    to the environment)."""
    wh, tb = shlex.quote(warehouse), shlex.quote(table)
    secret = ("key", "secret", "token", "password")
    wh = " ".join([*(f"--option {shlex.quote(f'{k}={v}')}" for k, v in sorted((catalog_options or {}).items())
                     if not any(w in k.lower() for w in secret)), wh])
    print("\nnext")
    print(f"  .venv/bin/lakehouse buckets {wh} {tb}            # records, files, sorted runs per bucket")
    print(f"  .venv/bin/lakehouse read {wh} {tb} --limit 5     # merged rows")
    print(f"  .venv/bin/lakehouse create-tag {wh} {tb} --tag first-run   # keep this snapshot")
    print("  make dev     # the Dagster UI on http://127.0.0.1:3000, showing this run")
    print("  make run     # again: continues the same table (new days only); nothing is dropped")
