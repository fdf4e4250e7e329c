"""`make run`: the main Dagster job end to end in this process, then a summary.

1. Sample order events are written as landing files under the warehouse (JSON lines, CSV and
   parquet, one folder per day), with a few invalid records per day that must be quarantined.
2. `main_job` runs once over the sample's days with the in-process executor: ingestion,
   bucket assignment, the Spark write, compaction, rescale advice, snapshot expiry, and every
   asset check.
3. The summary shows what each asset and check reported, the sorted-run sensor's verdict, the
   table's buckets, and a model check: the merged table equals an independent model of the
   valid events, so no invalid record got in and no valid one was lost.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from pipelines.sample_data import (
    PARTITION_KEY,
    PRIMARY_KEY,
    ROWKIND,
    apply_to_model,
    generate_order_events,
)

TABLE = "shop.orders"
# Landing formats, in turn per batch of a day.
FORMAT_CYCLE = ("jsonl", "csv", "parquet", "jsonl")


# ---- landing files ---------------------------------------------------------------------------
def _json_value(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if hasattr(value, "as_tuple"):  # Decimal: a JSON number with its exact digits
        return float(value)
    return value


def _write_jsonl(rows: list[dict[str, Any]], path: Path, extra_lines: tuple[str, ...] = ()) -> None:
    with open(path, "w") as out:
        for row in rows:
            out.write(json.dumps({k: _json_value(v) for k, v in row.items()}) + "\n")
        for line in extra_lines:
            out.write(line + "\n")


def _rejects(day: pa.Table, other_day: str) -> list[dict[str, Any]]:
    """Real events of the day, each broken in one way and stamped last, so it would win if written."""
    last = pc.max(day.column("updated_at")).as_py() + datetime.timedelta(microseconds=1)
    base = day.slice(0, 5).to_pylist()
    broken = [("amount", -5), ("order_id", None), ("_rowkind", "+X"), ("dt", other_day), ("quantity", 0)]
    rows = []
    for row, (column, value) in zip(base, broken, strict=True):
        rows.append({**row, "updated_at": last, column: value})
    return rows


def write_landing(landing: Path, batches: list[pa.Table]) -> Counter[str]:
    """The batches as landing files (formats in turn) plus a rejects file per day; files per format."""
    formats: Counter[str] = Counter()
    days = sorted({b.column(PARTITION_KEY)[0].as_py() for b in batches if b.num_rows})
    for i, batch in enumerate(b for b in batches if b.num_rows):
        dt = batch.column(PARTITION_KEY)[0].as_py()
        folder = landing / f"{PARTITION_KEY}={dt}"
        folder.mkdir(parents=True, exist_ok=True)
        fmt = FORMAT_CYCLE[i % len(FORMAT_CYCLE)]
        path = folder / f"orders-{i:04d}.{fmt}"
        if fmt == "jsonl":
            _write_jsonl(batch.to_pylist(), path)
        elif fmt == "csv":
            pa_csv.write_csv(batch, path)
        else:
            pq.write_table(batch, path)
        formats[fmt] += 1
    for dt in days:
        day = pa.concat_tables(b for b in batches if b.num_rows and b.column(PARTITION_KEY)[0].as_py() == dt)
        other = next((d for d in days if d != dt), "1999-01-01")
        _write_jsonl(_rejects(day, other), landing / f"{PARTITION_KEY}={dt}" / "rejects.jsonl",
                     extra_lines=('{"order_id": 1, "dt": "' + dt + '", truncated',))
        formats["jsonl"] += 1
    return formats


# ---- the summary -----------------------------------------------------------------------------
def _value(entry: Any) -> Any:
    return getattr(entry, "value", entry)


def _text(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


_SHOWN = {
    "ingested_events": ("new_files", "rows_staged", "rows_quarantined"),
    "bucket_assignment": ("bucket_mode", "rows", "buckets_assigned", "new_buckets"),
    "lsm_write": ("snapshot_id", "commit_kind", "rows_written", "files_added", "table_records",
                  "max_sorted_runs", "bucket_skew"),
    "sorted_run_compaction": ("buckets_compacted", "compaction_trigger", "max_sorted_runs"),
    "postpone_compaction": ("bucket_mode", "rows_moved"),
    "rescale": ("partitions_rescaled", "partitions_off_advice", "buckets"),
    "snapshot_expiry": ("snapshots_expired", "snapshots_retained", "orphan_files_removed"),
}


def print_summary(result: Any) -> bool:
    """Print what each asset and check reported; True when no ERROR check failed."""
    seen: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        seen.setdefault(mat.asset_key.to_user_string(), {k: _value(v) for k, v in mat.metadata.items()})
    print("\nassets")
    for name, keys in _SHOWN.items():
        if name not in seen:
            print(f"  {name:<23} not materialized")
            continue
        shown = ", ".join(f"{k}={_text(seen[name][k])}" for k in keys if k in seen[name])
        print(f"  {name:<23} {shown}")
        if name == "ingested_events":
            for reason, n in (seen[name].get("quarantine_reason_counts") or {}).items():
                print(f"  {'':<23}   quarantined {n:,} x {reason}")
    ok = True
    print("\nasset checks")
    for evaluation in result.get_asset_check_evaluations():
        key = evaluation.asset_check_key
        verdict = "passed" if evaluation.passed else f"FAILED ({evaluation.severity.value})"
        if not evaluation.passed and evaluation.severity.value == "ERROR":
            ok = False
        detail = evaluation.description or ", ".join(
            f"{k}={_text(_value(v))}" for k, v in list(evaluation.metadata.items())[:3])
        print(f"  {key.asset_key.to_user_string() + ':' + key.name:<58} {verdict}  {detail}")
    return ok


def print_table(warehouse: str) -> tuple[Any, Any]:
    """The table's buckets and merged rows per partition; returns (table, merged rows)."""
    from lakehouse_engine import Catalog

    table = Catalog(warehouse).get_table(TABLE)
    stats = table.bucket_stats()
    print(f"\n{'partition':<16}{'bucket':>7}{'records':>10}{'files':>7}{'runs':>6}{'bytes':>11}")
    for r in stats.to_pylist():
        print(f"{r['partition']:<16}{r['bucket']:>7}{r['record_count']:>10,}{r['file_count']:>7}"
              f"{r['sorted_runs']:>6}{r['size_bytes']:>11,}")
    rb = table.new_read_builder()
    merged = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    counts = merged.group_by(PARTITION_KEY).aggregate([(PARTITION_KEY, "count")]).sort_by(PARTITION_KEY)
    print("\nmerged rows per partition: " + ", ".join(
        f"{d}={n:,}" for d, n in zip(counts.column(0).to_pylist(), counts.column(1).to_pylist(), strict=True)))
    return table, merged


# ---- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default=os.environ.get("LAKEHOUSE_WAREHOUSE", "./warehouse"))
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--rows-per-day", type=int, default=50_000)
    parser.add_argument("--buckets", type=int, default=4, help="bucket count of the (fixed-bucket) table")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spark-master", default=os.environ.get("LAKEHOUSE_SPARK_MASTER", "local[*]"))
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", module="dagster")  # beta/preview notices, once per process

    import dagster as dg

    from pipelines.automation import sorted_runs_sensor
    from pipelines.definitions import defs
    from pipelines.ingest import DAILY_PARTITIONS
    from pipelines.resources import LakehouseResource

    warehouse = os.path.abspath(args.warehouse)
    lakehouse = LakehouseResource(warehouse=warehouse, table=TABLE, bucket=args.buckets)
    start = datetime.date.fromisoformat(DAILY_PARTITIONS.start.strftime("%Y-%m-%d"))
    days = [(start + datetime.timedelta(days=d)).isoformat() for d in range(args.days)]
    missing = [d for d in days if not DAILY_PARTITIONS.has_partition_key(d)]
    if missing:
        print(f"days {missing} are not partitions yet (the clock says {datetime.date.today()}); "
              f"set LAKEHOUSE_PARTITIONS_START to an earlier day", file=sys.stderr)
        return 2

    # A fresh table and fresh pipeline folders, so every `make run` shows the same thing.
    lakehouse.catalog().drop_table(TABLE, ignore_if_not_exists=True)
    for folder in (lakehouse.landing_path, lakehouse.staging_path, lakehouse.quarantine_path):
        shutil.rmtree(folder, ignore_errors=True)
    lakehouse.ledger_path.unlink(missing_ok=True)
    batches = generate_order_events(days=args.days, rows_per_day=args.rows_per_day, seed=args.seed, start=start)
    formats = write_landing(lakehouse.landing_path, batches)
    events = sum(b.num_rows for b in batches)
    print(f"table {TABLE} at {warehouse} (bucket = {args.buckets})")
    print(f"landing: {events:,} events in {sum(formats.values())} files "
          f"({', '.join(f'{n} {f}' for f, n in sorted(formats.items()))}) under {lakehouse.landing_path}, "
          f"5 invalid records + 1 malformed line per day")

    home = os.environ.get("DAGSTER_HOME")
    if home:
        os.makedirs(home, exist_ok=True)
    instance = dg.DagsterInstance.get() if home else dg.DagsterInstance.ephemeral()
    run_config = {"resources": {
        "lakehouse": {"config": {"warehouse": warehouse, "table": TABLE, "bucket": args.buckets}},
        "spark": {"config": {"master": args.spark_master}}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    started = time.perf_counter()
    result = defs.resolve_job_def("main_job").execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=False,
        tags={"dagster/asset_partition_range_start": days[0], "dagster/asset_partition_range_end": days[-1]})
    elapsed = time.perf_counter() - started
    print(f"\nmain_job run {result.run_id[:8]} over {days[0]}..{days[-1]}: "
          f"{'SUCCESS' if result.success else 'FAILURE'} in {elapsed:.1f} s (Spark master {args.spark_master})")
    checks_ok = print_summary(result)

    tick = sorted_runs_sensor.evaluate_tick(
        dg.build_sensor_context(instance=instance, resources={"lakehouse": lakehouse}))
    if tick.run_requests:
        print(f"\nsorted-run sensor: would request compaction ({tick.run_requests[0].run_key})")
    else:
        print(f"\nsorted-run sensor: skip ({tick.skip_message})")

    if not result.success:
        return 1
    _, merged = print_table(warehouse)
    expected = apply_to_model(batches)
    got = merged.select(expected.column_names).sort_by([(k, "ascending") for k in PRIMARY_KEY])
    ok = got.num_rows == expected.num_rows and got.cast(expected.schema).equals(expected)
    deleted = sum(pc.sum(pc.equal(b.column(ROWKIND), "-D")).as_py() or 0 for b in batches)
    print(f"model check: {'OK' if ok else 'MISMATCH'} ({got.num_rows:,} rows; {deleted:,} delete events applied)")
    return 0 if ok and checks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
