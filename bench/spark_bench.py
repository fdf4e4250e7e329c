"""Spark (local[2]; local[1] on request) against the engine in one process and against Spark's
own parquet write and read: write and full read of the same rows.

The rows are the foundation benchmark's initial load (`bench_data.make_bench_data`: id BIGINT
primary key, a 20-character string, BIGINT, DOUBLE, TIMESTAMP) into `bucket = 4`, staged once
as 8 parquet files that every runner reads (untimed staging; the timed write includes reading them):

* engine: `pq.read_table` + `write_arrow` + commit; read = `to_arrow` of every split. One
  process, which sorts and encodes the buckets on all cores (threads: Arrow releases the GIL).
* Spark, a parquet scan: `lakehouse_engine.spark.write(spark.read.parquet(src), table)`; the
  packing tasks read the files themselves (`lakehouse_engine.spark.file_scan`), one shuffle of
  packed rows, TableWrite per task, one commit. Read = `lakehouse_engine.spark.read(spark,
  table)` (raw-convertible splits by Spark's own parquet reader) into Spark's `noop` sink, which
  materialises every row in the JVM without writing it.
* Spark, a query's rows: the same write of `spark.read.parquet(src).select(<columns reversed>)`,
  a DataFrame that is more than a scan, so Spark hands every row to Python (packed per write
  task with the engine's hash). Read = the `lakehouse` data source into `noop`.
* Spark native, in the same session, per size and repeat: the write Spark does itself for the
  same layout, `spark.read.parquet(src).repartition(4, "id").sortWithinPartitions("id")
  .write.parquet(...)` into a fresh directory, and the read `spark.read.parquet(<the data files
  our write just wrote>)` into the `noop` sink. "write vs Spark native" and "read vs Spark
  native" divide each of our Spark writes and reads by these.
* Spark hand-off: `spark.read.parquet` + a `mapInArrow` that only counts the rows it receives:
  what Spark needs to read the source and hand every row to Python once, before any routing or
  writing.

Session start-up is not timed, and each session first runs every runner on 50k rows untimed:
the first jobs of a fresh JVM run several times slower (class loading, JIT). Every runner
repeats each size `--repeat` times (3 by default; sizes interleaved, a fresh table each time)
and the table shows the median and the range: on this 2-core VM one run of the same job varies
by up to a third. Sessions are `create_session`'s (Arrow batches of up to 128Ki rows / 16 MiB).
Run: `python -m bench.spark_bench --rows 1000000 5000000 --repeat 3 [--cores 1 2]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.bench_data import BENCH_SCHEMA, PRIMARY_KEY, make_bench_data
from bench.machine import describe_machine, format_markdown_table
from lakehouse_engine import Catalog, Schema
from lakehouse_engine.table import FileStoreTable

BUCKETS = 4
SOURCE_FILES = 8
WARM_UP_ROWS = 50_000
COLUMNS = ["rows", "runner", "write s", "write s range", "write rows/s", "write vs engine", "write vs Spark native",
           "hand-off s", "hand-off vs engine write", "write - hand-off vs engine", "read s", "read rows/s",
           "read vs engine", "read vs Spark native", "verified"]
TIMES = ("write_s", "read_s", "handoff_s")
NATIVE_SUFFIX = ", native parquet"
SPARK_METHOD = (
    f"The foundation benchmark's rows into `bucket = {BUCKETS}`, staged as {SOURCE_FILES} parquet files that every "
    "timed write reads. Engine: `pq.read_table` + `write_arrow` + commit in one process; read: every split. "
    "Spark, a parquet scan: `lakehouse_engine.spark.write(spark.read.parquet(src), table)` (the packing tasks "
    "read the files themselves, one shuffle of packed rows, TableWrite per task, one commit); read: "
    "`lakehouse_engine.spark.read(spark, table)` (raw-convertible splits by Spark's parquet reader) into "
    "Spark's `noop` sink. Spark, a query's rows: the same write of `spark.read.parquet(src).select(<columns "
    "reversed>)`, whose rows Spark hands to Python; read: the `lakehouse` data source into `noop`. Spark native, "
    "same session: `spark.read.parquet(src).repartition(4, \"id\").sortWithinPartitions(\"id\").write.parquet(...)`; "
    "read: `spark.read.parquet(<our write's data files>)` into `noop`. Hand-off: `spark.read.parquet` + a "
    "`mapInArrow` that only counts rows. \"verified\": row count and sum of ids equal the source's. Session "
    "start-up and a 50k-row warm-up are not timed.")


def _stage(rows: int, directory: Path) -> None:
    """The benchmark rows as parquet files, the input of every runner."""
    data, _ = make_bench_data(rows, 0)
    directory.mkdir(parents=True)
    step = -(-rows // SOURCE_FILES)
    for i in range(SOURCE_FILES):
        pq.write_table(data.slice(i * step, step), directory / f"part-{i}.parquet")


def _new_table(warehouse: Path) -> FileStoreTable:
    catalog = Catalog(str(warehouse))
    catalog.create_database("bench", ignore_if_exists=True)
    catalog.create_table("bench.orders", Schema.from_pyarrow_schema(
        BENCH_SCHEMA, primary_keys=[PRIMARY_KEY], options={"bucket": str(BUCKETS)}))
    return catalog.get_table("bench.orders")


def _engine_run(source: Path, warehouse: Path, rows: int) -> dict[str, Any]:
    table = _new_table(warehouse)
    t0 = time.perf_counter()
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pq.read_table(source, schema=BENCH_SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    t1 = time.perf_counter()
    rb = table.new_read_builder()
    result = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    t2 = time.perf_counter()
    return {"runner": "engine, one process", "write_s": t1 - t0, "read_s": t2 - t1,
            "verified": result.num_rows == rows}


def _count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"rows": [sum(b.num_rows for b in batches)]})


FILES_RUNNER = "Spark local[{n}]: `write` of a parquet scan, `read`"
ROWS_RUNNER = "Spark local[{n}]: `write` of a query's rows, `lakehouse` source"


def _spark_run(spark: Any, source: Path, warehouse: Path, rows: int, cores: int) -> list[dict[str, Any]]:
    """Our writes and reads, the hand-off, and Spark's native write and read of the same rows."""
    from pyspark.sql import functions as F

    from lakehouse_engine.spark import read, write

    table = _new_table(warehouse / "files")
    query_table = _new_table(warehouse / "rows")
    t0 = time.perf_counter()
    handed = sum(r[0] for r in spark.read.parquet(str(source)).mapInArrow(_count_rows, "rows long").collect())
    handoff_s = time.perf_counter() - t0
    # A plain scan of files: the packing tasks read them (`spark.file_scan`).
    t0 = time.perf_counter()
    write(spark.read.parquet(str(source)), table)
    files_write_s = time.perf_counter() - t0
    # Rows of a query (here a projection): Spark hands every row to Python.
    scan = spark.read.parquet(str(source))
    t0 = time.perf_counter()
    write(scan.select(*reversed(scan.columns)), query_table)
    rows_write_s = time.perf_counter() - t0
    # Raw-convertible splits read by Spark's parquet reader, the others through the source.
    t0 = time.perf_counter()
    ours = read(spark, table)
    ours.write.format("noop").mode("overwrite").save()
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    source_df = spark.read.format("lakehouse").option("warehouse", str(warehouse / "files")).load("bench.orders")
    source_df.write.format("noop").mode("overwrite").save()
    source_read_s = time.perf_counter() - t0
    splits = table.new_read_builder().new_scan().plan().splits()
    native_dir = warehouse / "native-write"
    t0 = time.perf_counter()
    spark.read.parquet(str(source)).repartition(BUCKETS, "id").sortWithinPartitions("id") \
        .write.parquet(str(native_dir))
    native_write_s = time.perf_counter() - t0
    files = [p for s in splits for p in s.file_paths]
    t0 = time.perf_counter()
    native = spark.read.parquet(*files)
    native.write.format("noop").mode("overwrite").save()
    native_read_s = time.perf_counter() - t0
    ids = spark.read.parquet(str(source)).agg(F.count("*"), F.sum("id")).first()
    same = [df.agg(F.count("*"), F.sum("id")).first() == ids for df in (ours, source_df, native)]
    query_rows = sum(s.row_count for s in query_table.new_read_builder().new_scan().plan().splits())
    return [
        {"runner": FILES_RUNNER.format(n=cores), "write_s": files_write_s, "read_s": read_s,
         "verified": all(same[:2]) and handed == rows},
        {"runner": ROWS_RUNNER.format(n=cores), "write_s": rows_write_s, "read_s": source_read_s,
         "handoff_s": handoff_s, "verified": same[1] and query_rows == rows},
        {"runner": f"Spark local[{cores}]{NATIVE_SUFFIX}", "write_s": native_write_s, "read_s": native_read_s,
         "verified": same[2] and spark.read.parquet(str(native_dir)).count() == rows},
    ]


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One runner's repeated runs of one size: the median of each time, the write range."""
    out = {k: v for k, v in runs[0].items() if k not in TIMES}
    for key in TIMES:
        if key in runs[0]:
            out[key] = statistics.median(r[key] for r in runs)
    out["write_range"] = (min(r["write_s"] for r in runs), max(r["write_s"] for r in runs))
    out["verified"] = all(r["verified"] for r in runs)
    return out


def _table(results: list[dict[str, Any]]) -> str:
    engine = {r["rows"]: r for r in results if r["runner"].startswith("engine")}
    native = {(r["rows"], r["runner"].split(":")[0].removesuffix(NATIVE_SUFFIX)): r for r in results
              if r["runner"].endswith(NATIVE_SUFFIX)}
    out = []
    for r in results:
        base = engine[r["rows"]]
        ours = r["runner"].startswith("Spark") and not r["runner"].endswith(NATIVE_SUFFIX)
        spark_native = native.get((r["rows"], r["runner"].split(":")[0])) if ours else None
        out.append({
            "rows": r["rows"], "runner": r["runner"],
            "write s": f"{r['write_s']:.2f}", "write s range": "{:.2f}-{:.2f}".format(*r["write_range"]),
            "write rows/s": f"{r['rows'] / r['write_s']:,.0f}",
            "write vs engine": f"{r['write_s'] / base['write_s']:.2f}x",
            "write vs Spark native": f"{r['write_s'] / spark_native['write_s']:.2f}x" if spark_native else "",
            "hand-off s": f"{r['handoff_s']:.2f}" if "handoff_s" in r else "",
            "hand-off vs engine write": f"{r['handoff_s'] / base['write_s']:.2f}x" if "handoff_s" in r else "",
            "write - hand-off vs engine":
                f"{(r['write_s'] - r['handoff_s']) / base['write_s']:.2f}x" if "handoff_s" in r else "",
            "read s": f"{r['read_s']:.2f}", "read rows/s": f"{r['rows'] / r['read_s']:,.0f}",
            "read vs engine": f"{r['read_s'] / base['read_s']:.2f}x",
            "read vs Spark native": f"{r['read_s'] / spark_native['read_s']:.2f}x" if spark_native else "",
            "verified": r["verified"],
        })
    return format_markdown_table(out, COLUMNS)


def run_spark_bench(rows_list: Sequence[int] = (1_000_000, 5_000_000, 10_000_000),
                    cores: Sequence[int] = (2,), repeat: int = 3) -> str:
    """Seconds to write and to read `rows` rows per runner (median of `repeat` runs), as Markdown.

    "vs engine" is the runner's median time divided by the engine's (above 1.00x: slower);
    "vs Spark native" our Spark write's (read's) median divided by Spark's own parquet write's
    (read's) in the same session;
    "write - hand-off vs engine" is what the Spark write costs beyond Spark's own hand-off of the
    rows to Python, against the engine's whole write.
    """
    from lakehouse_engine.spark.session import create_session

    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}

    def record(rows: int, results: dict[str, Any] | list[dict[str, Any]], warehouse: Path) -> None:
        for run in results if isinstance(results, list) else [results]:
            runs.setdefault((rows, run["runner"]), []).append({"rows": rows, **run})
        shutil.rmtree(warehouse, ignore_errors=True)

    try:
        _stage(WARM_UP_ROWS, work / "source-warm-up")
        for rows in rows_list:
            _stage(rows, work / f"source-{rows}")
        for i in range(repeat):
            for rows in rows_list:
                warehouse = work / f"engine-{rows}-{i}"
                record(rows, _engine_run(work / f"source-{rows}", warehouse, rows), warehouse)
        for n in cores:
            spark = create_session(f"local[{n}]", app_name="lakehouse-bench", shuffle_partitions=BUCKETS,
                                   driver_memory="6g")
            try:
                _spark_run(spark, work / "source-warm-up", work / f"warm-up-{n}", WARM_UP_ROWS, n)
                for i in range(repeat):
                    for rows in rows_list:
                        warehouse = work / f"spark{n}-{rows}-{i}"
                        record(rows, _spark_run(spark, work / f"source-{rows}", warehouse, rows, n), warehouse)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = [_summary(r) for r in runs.values()]
    results.sort(key=lambda r: (r["rows"], r["runner"] != "engine, one process",
                                r["runner"].endswith(NATIVE_SUFFIX), r["runner"]))
    return (f"Median of {repeat} runs per row (range: fastest-slowest write).\n\n" if repeat > 1 else "") \
        + _table(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000, 10_000_000])
    parser.add_argument("--cores", type=int, nargs="+", default=[2])
    parser.add_argument("--repeat", type=int, default=3, help="runs per runner and size (median reported)")
    args = parser.parse_args(argv)
    machine = describe_machine()
    print("Machine: " + ", ".join(f"{k}: {v}" for k, v in machine.items()) + "\n")
    print(run_spark_bench(args.rows, args.cores, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())

