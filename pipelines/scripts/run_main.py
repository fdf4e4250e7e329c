"""`make run`: the main Dagster job end to end in this process, then a summary.

1. Sample order events are written as landing files under the warehouse, or under the pipeline
   folder of an object-store warehouse (`--pipeline-dir`) (JSON lines, CSV and parquet, one
   folder per day of the daily partitions' window: the last `WINDOW_DAYS` days, ending today),
   with a few invalid records per day that must be quarantined. Days that already have landing
   files keep them. Each day's events depend only on that day and the seed, so the run is the
   same size any day and a later run regenerates an earlier day exactly. From the third day of
   the first sample on, the events carry one more column, `coupon_code`: the write adds it to
   the table, and the rows of the days before read it as null.
2. `main_job` runs once over the sample's days with the in-process executor on the Dagster
   instance `make dev` shows (`DAGSTER_HOME`, default `.dagster_home`): ingestion, bucket
   assignment, the Spark write, compaction, rescale advice, snapshot expiry, and every check.
3. The summary shows what each asset and check reported, the sorted-run sensor's verdict, the
   table's buckets, and a model check: the merged table equals an independent model of the
   valid events, so no invalid record got in and no valid one was lost.

Nothing is dropped: a second run finds its files in the ingestion ledger and continues the same
table (tags and snapshots stay); a new day adds its events. A sample with other settings than
the one a table was started with needs its own table (`--table`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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

from pipelines.lib.events import PARTITION_KEY, PRIMARY_KEY, ROWKIND
from pipelines.lib.partitions import WINDOW_DAYS, day_of
from pipelines.lib.sample_data import apply_to_model, generate_order_events

TABLE = "shop.orders"
# The sample's events gain `coupon_code` from this day on (days after the first partition).
COUPONS_FROM_DAY = 2
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


# ---- the sample: one day at a time, its settings kept beside its landing files -----------------
SAMPLE_FILE = "_sample.json"  # a leading "_": ingestion never reads it
SAMPLE_FORMAT = "per-day"


def day_events(dt: datetime.date, rows_per_day: int, seed: int, coupons: bool) -> list[pa.Table]:
    """One day's sample events (four batches), a function of the day and the seed alone: order ids
    repeat across days, which the key `(order_id, dt)` keeps apart."""
    return generate_order_events(days=1, rows_per_day=rows_per_day, seed=seed * 1_000_000 + dt.toordinal(),
                                 start=dt, coupons_from=dt if coupons else None)


def sample_settings(landing: Path, first_day: datetime.date, rows_per_day: int, seed: int) -> dict[str, Any]:
    """The sample's settings: those stored beside the landing files, or new ones whose
    `coupon_code` starts `COUPONS_FROM_DAY` days after `first_day`.

    SystemExit naming the table's way out when the stored sample differs (other rows per day or
    seed, or a sample of the earlier layout, whose days depended on its first day)."""
    wanted: dict[str, Any] = {"format": SAMPLE_FORMAT, "rows_per_day": rows_per_day, "seed": seed}
    stored = landing / SAMPLE_FILE
    if not stored.exists():
        return {**wanted, "coupons_from": (first_day + datetime.timedelta(days=COUPONS_FROM_DAY)).isoformat()}
    before = json.loads(stored.read_text())
    if {k: before.get(k) for k in wanted} != wanted:
        raise SystemExit(
            f"the landing files of this table were generated with {before}, not {wanted}: "
            f"use the same settings, or another table (--table shop.orders_2)")
    return dict(before)


def sample_events(settings: dict[str, Any], days: list[datetime.date]) -> list[pa.Table]:
    """The sample's events of these days (in day order)."""
    coupons_from = datetime.date.fromisoformat(settings["coupons_from"])
    return [batch for dt in days
            for batch in day_events(dt, settings["rows_per_day"], settings["seed"], dt >= coupons_from)]


def landing_for(landing: Path, settings: dict[str, Any], batches: list[pa.Table]) -> Counter[str]:
    """Write the landing files of the days that have none yet, store the settings; files per format."""
    present = {day_of(p.name) for p in landing.glob(f"{PARTITION_KEY}=*") if p.is_dir()}
    new = [b for b in batches if b.num_rows and b.column(PARTITION_KEY)[0].as_py() not in present]
    formats = write_landing(landing, new) if new else Counter[str]()
    landing.mkdir(parents=True, exist_ok=True)
    (landing / SAMPLE_FILE).write_text(json.dumps(settings, sort_keys=True))
    return formats


def landed_days(landing: Path) -> list[datetime.date]:
    """The days with a landing folder (this run's and earlier runs'), oldest first."""
    return sorted(datetime.date.fromisoformat(day_of(p.name)) for p in landing.glob(f"{PARTITION_KEY}=*")
                  if p.is_dir())


def sample_days(days: int, today: datetime.date) -> list[datetime.date]:
    """The last `days` days of the partition window, ending `today`."""
    return [today - datetime.timedelta(days=d) for d in reversed(range(days))]


def default_pipeline_dir(warehouse: str) -> str | None:
    """Where the pipeline's local folders go for `warehouse`: beside the table when it is local
    (None: the resource's default), else `./pipeline/<scheme>/<bucket>/<path>`, one per warehouse so
    two warehouses never share a ledger."""
    if "://" not in warehouse or warehouse.startswith("file://"):
        return None
    scheme, rest = warehouse.split("://", 1)
    return os.path.abspath(os.path.join("pipeline", scheme, rest.strip("/")))


def run(warehouse: str, table: str = TABLE, days: int | None = None, rows_per_day: int = 5_000,
        buckets: int = 4, seed: int = 7, spark_master: str = "local[*]", keep_spark: bool = False,
        instance: Any = None, catalog_options: dict[str, str] | None = None,
        pipeline_dir: str | None = None) -> int:
    """Land the sample, run `main_job` on the instance, print the summary; the exit code.

    `catalog_options` reach an object-store warehouse (`s3.endpoint`, ...; credentials best from
    `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`); `pipeline_dir` holds the landing, staging and
    quarantine folders and the ledger (default: the local warehouse, `default_pipeline_dir`)."""
    import dagster as dg

    from lakehouse_engine.spark import credentials_conf
    from pipelines.definitions import defs
    from pipelines.defs.compaction.sensors import sorted_runs_sensor
    from pipelines.lib.partitions import DAILY_PARTITIONS
    from pipelines.lib.resources import LakehouseResource
    from pipelines.scripts.instance import prepare_home
    from pipelines.scripts.summary import print_next_steps, print_summary, print_table

    options = dict(catalog_options or {})
    pipeline_dir = pipeline_dir or default_pipeline_dir(warehouse)
    if "://" not in warehouse:
        warehouse = os.path.abspath(warehouse)
    lakehouse = LakehouseResource(warehouse=warehouse, table=table, bucket=buckets,
                                  catalog_options=options, pipeline_dir=pipeline_dir)
    # Credentials given as options reach the Spark tasks through the session's configuration
    # (the executors' environment), never inside a task.
    executor_env = credentials_conf(options)
    count = WINDOW_DAYS if days is None else days
    if not 1 <= count <= WINDOW_DAYS:
        print(f"--days must be 1..{WINDOW_DAYS} (the daily partitions' window ends today)", file=sys.stderr)
        return 2
    today = datetime.datetime.now(datetime.timezone.utc).date()
    sample = sample_days(count, today)
    wanted = [d.isoformat() for d in sample]
    missing = [d for d in wanted if not DAILY_PARTITIONS.has_partition_key(d)]
    if missing:  # the window was computed when the definitions loaded: before midnight UTC
        print(f"days {missing[0]}..{missing[-1]} are not daily partitions of this process (the clock "
              f"says {today}); run again", file=sys.stderr)
        return 2

    settings = sample_settings(lakehouse.landing_path, sample[0], rows_per_day, seed)
    batches = sample_events(settings, sample)
    existed = lakehouse.table_exists()
    formats = landing_for(lakehouse.landing_path, settings, batches)
    events = sum(b.num_rows for b in batches)
    print(f"table {table} in warehouse {warehouse} "
          f"({'continued: nothing is dropped' if existed else f'new, bucket = {buckets}'})")
    print(f"landing: {events:,} sample events over {len(wanted)} days under {lakehouse.landing_path}; "
          + (f"{sum(formats.values())} new files ({', '.join(f'{n} {f}' for f, n in sorted(formats.items()))}), "
             f"5 invalid records + 1 malformed line per new day" if formats else
             "no new files (the ingestion ledger has every day already)"))

    if instance is None:
        home = prepare_home()
        instance = dg.DagsterInstance.get()
        print(f"dagster instance: {home} (`make dev` shows this run)")
    run_config = {"resources": {
        # Every field the code location binds to an environment variable is given here: `make run`
        # needs none of them set.
        "lakehouse": {"config": {"warehouse": warehouse, "table": table, "bucket": buckets,
                                 "catalog_options": options, "catalog_options_json": "",
                                 "pipeline_dir": pipeline_dir or ""}},
        "spark": {"config": {"master": spark_master, "stop_on_teardown": not keep_spark,
                             "spark_config": executor_env}}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    started = time.perf_counter()
    result = defs.resolve_job_def("main_job").execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=False,
        tags={"dagster/asset_partition_range_start": wanted[0], "dagster/asset_partition_range_end": wanted[-1]})
    elapsed = time.perf_counter() - started
    print(f"\nmain_job run {result.run_id[:8]} over {wanted[0]}..{wanted[-1]}: "
          f"{'SUCCESS' if result.success else 'FAILURE'} in {elapsed:.1f} s (Spark master {spark_master})")
    checks_ok = print_summary(result)

    tick = sorted_runs_sensor.evaluate_tick(
        dg.build_sensor_context(instance=instance, resources={"lakehouse": lakehouse}))
    if tick.run_requests:
        print(f"\nsorted-run sensor: would request compaction ({tick.run_requests[0].run_key})")
    else:
        print(f"\nsorted-run sensor: skip ({tick.skip_message})")

    if not result.success:
        return 1
    merged = print_table(warehouse, table, result, options)
    # Every day this table has landed, this run's and earlier runs' (each regenerated exactly).
    expected = apply_to_model(sample_events(settings, landed_days(lakehouse.landing_path)))
    got = merged.select(expected.column_names).sort_by([(k, "ascending") for k in PRIMARY_KEY])
    ok = got.num_rows == expected.num_rows and got.cast(expected.schema).equals(expected)
    deleted = sum(pc.sum(pc.equal(b.column(ROWKIND), "-D")).as_py() or 0 for b in batches)  # this run's days
    print(f"model check: {'OK' if ok else 'MISMATCH'}: the merged rows equal the valid sample events "
          f"applied in order ({deleted:,} delete events included)")
    revenue_ok = print_revenue_check(lakehouse)
    print_next_steps(warehouse, table, options)
    return 0 if ok and checks_ok and revenue_ok else 1


def print_revenue_check(lakehouse: Any) -> bool:
    """daily_revenue (kept from the changelog) equals the aggregate recomputed from the orders in full."""
    from lakehouse_engine import POSTPONE_BUCKET
    from pipelines.defs.downstream.assets import revenue_table_name
    from pipelines.lib import revenue

    if lakehouse.get_table().options.bucket == POSTPONE_BUCKET:
        print("daily_revenue: not maintained on a postpone-bucket table (no changelog)")
        return True
    target = lakehouse.catalog().get_table(revenue_table_name(lakehouse))
    got = revenue.live_groups(revenue.read_all(target))
    ok = got.equals(revenue.full_aggregate(revenue.read_all(lakehouse.get_table())))
    print(f"daily_revenue check: {'OK' if ok else 'MISMATCH'}: {got.num_rows} (day, status) groups, "
          f"{sum(got.column(revenue.ORDERS).to_pylist()):,} orders, equal to the full recompute from "
          f"{lakehouse.table}")
    return ok


# ---- main ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """`python -m pipelines.scripts.run_main`: parse the arguments and `run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default=os.environ.get("LAKEHOUSE_WAREHOUSE", "./warehouse"))
    parser.add_argument("--table", default=os.environ.get("LAKEHOUSE_TABLE", TABLE),
                        help="database.table to write (never dropped; a re-run continues it)")
    parser.add_argument("--days", type=int, default=None,
                        help=f"days of sample data, ending today (default and most: {WINDOW_DAYS}, the "
                             f"daily partitions' window)")
    parser.add_argument("--rows-per-day", type=int, default=5_000)
    parser.add_argument("--buckets", type=int, default=4, help="bucket count of a new (fixed-bucket) table")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spark-master", default=os.environ.get("LAKEHOUSE_SPARK_MASTER", "local[*]"))
    parser.add_argument("--pipeline-dir", default=os.environ.get("LAKEHOUSE_PIPELINE_DIR"),
                        help="local folder of landing, staging, quarantine and the ledger (default: the "
                             "warehouse when local, else ./pipeline/<scheme>/<bucket>/<path>)")
    args = parser.parse_args(argv)
    try:
        options = json.loads(os.environ.get("LAKEHOUSE_CATALOG_OPTIONS") or "{}")
    except json.JSONDecodeError as exc:
        parser.error(f"LAKEHOUSE_CATALOG_OPTIONS is not a JSON object of catalog options: {exc}")
    if not isinstance(options, dict):
        parser.error("LAKEHOUSE_CATALOG_OPTIONS must be a JSON object, e.g. '{\"s3.endpoint\": \"...\"}'")
    warnings.filterwarnings("ignore", module="dagster")  # beta/preview notices, once per process
    return run(args.warehouse, args.table, args.days, args.rows_per_day, args.buckets, args.seed,
               args.spark_master, catalog_options={str(k): str(v) for k, v in options.items()},
               pipeline_dir=args.pipeline_dir)


if __name__ == "__main__":
    sys.exit(main())
