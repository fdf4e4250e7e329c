"""What deletion vectors buy and cost: reads of a DV table against the same rows merged on read,
upserts with vectors against without, and Spark's read of a DV table against its own parquet read.

1. Tables: the foundation data (``rows`` rows, ``bucket = 4``) written, then its upsert
   (``upsert`` rows, half updates), once into a table with ``deletion-vectors.enabled`` and once
   into one without (the same writes: the second table merges its sorted runs on read).
2. Upsert: the commit of the upsert into each (fresh tables every repeat, the initial write not
   timed): the DV commit also looks its keys up and writes the vectors. Target: at most 1.5x.
   Twice: *cold* (the lookup cache of this process emptied first, as in a fresh process: the
   lookup decodes the older files' key columns) and *warm* (this process wrote the base and kept
   it in its lookup cache, as a long-running writer has it).
3. Read: a full read of each table (best of ``repeat``, alternating). Target: the DV read at least
   2x faster. Alongside, the floor of any read of the DV table: pyarrow decoding its live files'
   value columns (page checksums verified, as every engine read does), no vector applied, on a
   thread per core, largest file first (as the engine schedules its read); the DV read's ratio
   to it is what the engine adds to decoding.
4. Spark (unless ``spark=False``): ``lakehouse_engine.spark.read`` of the DV table against
   ``spark.read.parquet`` of the same files and columns without the vectors (Spark's own read of
   them; the figure is what applying the vectors adds), every row and column materialised into
   Spark's ``noop`` sink. Target: at most 1.1x.

Smoke run: ``.venv/bin/python -m bench.deletion_vector_bench --scale 0.02 --repeat 1``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_data import BENCH_SCHEMA, PRIMARY_KEY, make_bench_data
from bench.engine_bench import write_commit
from bench.machine import best_of_alternating, format_markdown_table
from lakehouse_engine import Catalog, Schema
from lakehouse_engine.mergetree.lookup_cache import clear_caches
from lakehouse_engine.table import FileStoreTable

_BUCKETS = "4"


def _tables(workdir: Path, initial: Any) -> dict[str, FileStoreTable]:
    catalog = Catalog(str(workdir / "warehouse"))
    catalog.create_database("db", ignore_if_exists=True)
    out = {}
    for name, dv in (("dv", "true"), ("dv_warm", "true"), ("merged", "false")):
        catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
            BENCH_SCHEMA, primary_keys=[PRIMARY_KEY],
            options={"bucket": _BUCKETS, "deletion-vectors.enabled": dv}))
        out[name] = catalog.get_table(f"db.{name}")
        write_commit(out[name], initial)
    return out


def _read(table: FileStoreTable) -> int:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows


def deletion_vector_figures(rows: int, upsert: int, repeat: int, spark: bool) -> list[dict[str, Any]]:
    """Seconds of each step with and without vectors, and their ratio against the target.

    Wall seconds, and this process's CPU seconds (all its threads): on a shared machine the wall
    clock measures the neighbours as much as the step, the CPU seconds what the step computed."""
    initial, changes = make_bench_data(rows, upsert)
    upserts: dict[str, list[tuple[float, float]]] = {"dv": [], "dv_warm": [], "merged": []}
    root = Path(tempfile.mkdtemp(prefix="dv-bench-"))
    try:
        for r in range(repeat):
            tables = _tables(root / f"round-{r}", initial)
            # Cold: the upsert's lookup reads the older files (a fresh process's lookup cache);
            # warm: this process wrote them and keeps them in its lookup cache.
            clear_caches([tables["dv"].store.path_factory.table_path])
            order = ["dv", "dv_warm", "merged"]
            for name in order if r % 2 == 0 else order[::-1]:  # alternating
                upserts[name].append(_timed(lambda t=tables[name]: write_commit(t, changes)))
            shutil.rmtree(root / f"round-{r}", ignore_errors=True)
            clear_caches()
        tables = _tables(root / "read", initial)
        del tables["dv_warm"]
        for table in tables.values():
            write_commit(table, changes)
        assert _read(tables["dv"]) == _read(tables["merged"])
        reads: dict[str, list[tuple[float, float]]] = {"dv": [], "merged": [], "floor": []}
        steps = {"dv": lambda: _read(tables["dv"]), "merged": lambda: _read(tables["merged"]),
                 "floor": _decode_floor(tables["dv"])}
        for r in range(repeat):
            for name in ("dv", "merged", "floor") if r % 2 == 0 else ("floor", "merged", "dv"):
                reads[name].append(_timed(steps[name]))
        up = {k: _best(v) for k, v in upserts.items()}
        rd = {k: _best(v) for k, v in reads.items()}
        out = [
            {"step": f"upsert of {upsert:,} rows (commit), cold lookup cache", "with vectors s": up["dv"][0],
             "merged on read s": up["merged"][0], "ratio": up["dv"][0] / up["merged"][0],
             "cpu ratio": up["dv"][1] / up["merged"][1], "target": "<= 1.5x"},
            {"step": "the same upsert, warm lookup cache (this process wrote the base)",
             "with vectors s": up["dv_warm"][0], "merged on read s": up["merged"][0],
             "ratio": up["dv_warm"][0] / up["merged"][0], "cpu ratio": up["dv_warm"][1] / up["merged"][1],
             "target": "<= 1.5x"},
            {"step": f"full read of {rows + upsert // 2:,} rows", "with vectors s": rd["dv"][0],
             "merged on read s": rd["merged"][0], "ratio": rd["merged"][0] / rd["dv"][0],
             "cpu ratio": rd["merged"][1] / rd["dv"][1], "target": ">= 2x faster"},
            {"step": "floor: pyarrow decode of the DV table's live files (value columns)",
             "with vectors s": rd["dv"][0], "merged on read s": None, "ratio": rd["dv"][0] / rd["floor"][0],
             "cpu ratio": rd["dv"][1] / rd["floor"][1], "target": "(DV read / floor)"},
        ]
        if spark:
            out.append(_spark_figures(tables["dv"], repeat))
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _decode_floor(table: FileStoreTable) -> Any:
    """A read of the DV table's live files as plain parquet, value columns only, a file per
    thread, largest first (as the engine's read schedules them), no vector applied: what no
    reader of these files can go below."""
    import pyarrow.parquet as pq

    from lakehouse_engine.threads import parallel_map

    rb = table.new_read_builder()
    files = [(f.file_size, f"{s.bucket_path}/{f.file_name}") for s in rb.new_scan().plan().splits()
             for f in s.files]
    paths = [p for _, p in sorted(files, key=lambda sp: -sp[0])]
    columns = table.schema.field_names

    def decode(path: str) -> Any:
        return pq.ParquetFile(path, page_checksum_verification=True).read(columns=columns)

    return lambda: parallel_map(decode, paths)


def _timed(step: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one run of `step`."""
    wall, cpu = time.perf_counter(), time.process_time()
    step()
    return time.perf_counter() - wall, time.process_time() - cpu


def _best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The best wall and the best CPU seconds of several runs."""
    return min(w for w, _ in runs), min(c for _, c in runs)


def _spark_figures(table: FileStoreTable, repeat: int) -> dict[str, Any]:
    from lakehouse_engine.spark.deletion_vectors import jvm_filter_loaded
    from lakehouse_engine.spark.read import read as spark_read
    from lakehouse_engine.spark.session import create_session

    spark = create_session("local[2]", app_name="dv-bench")
    try:
        files = [f"{table.path}/{p.relative_to(table.path)}" for p in Path(table.path).rglob("data-*.parquet")]
        live = {e.file.file_name for e in table.store.manifest_io().live_entries(table.latest_snapshot())}
        paths = [f for f in files if f.rsplit("/", 1)[-1] in live]
        columns = table.schema.field_names

        def scan(df: Any) -> None:
            # Every row and column materialised and dropped (Spark's `noop` sink): a count would let
            # Spark skip the columns, and the native side read no column at all.
            df.write.format("noop").mode("overwrite").save()

        best = best_of_alternating(repeat + 1, {  # (the first round warms the session up)
            "lakehouse": lambda: scan(spark_read(spark, table)),
            "native": lambda: scan(spark.read.parquet(*paths).select(*columns)),
        })
        # Which way the marked rows were removed: the JVM filter (`make spark-jar`) or the join.
        how = "JVM filter" if jvm_filter_loaded(spark) else "anti-join: no jar, run make spark-jar"
        return {"step": f"Spark read (all columns) of the DV table ({how})", "with vectors s": best["lakehouse"],
                "merged on read s": None, "ratio": best["lakehouse"] / best["native"],
                "target": "<= 1.1x of spark.read.parquet of its files"}
    finally:
        spark.stop()


def run_deletion_vector_bench(scale: float = 1.0, repeat: int = 3, spark: bool = True) -> str:
    """The deletion-vector section of docs/benchmarks.md."""
    rows, upsert = max(10_000, int(1_000_000 * scale)), max(2_000, int(200_000 * scale))
    figures = deletion_vector_figures(rows, upsert, repeat, spark)
    return ("## Deletion vectors: reads without merging, paid for at commit\n\n"
            f"{rows:,} rows into `bucket = 4`, then an upsert of {upsert:,} (half updates); best of "
            f"{repeat}. Ratio: upsert with vectors / without; read merged / with vectors; floor: the DV "
            "read / pyarrow's decode of its live files; Spark "
            "`lakehouse_engine.spark.read` / `spark.read.parquet` of the same files; cpu ratio: the same "
            "ratio of this process's CPU seconds (Spark's run in its JVM: wall only). Both reads run on a "
            "thread per core: the merged read one bucket per thread (its 4 buckets keep 2 cores busy), the DV "
            "read one file per thread; the floor is the DV table's files decoded, no vector applied.\n\n"
            + format_markdown_table(figures, ["step", "with vectors s", "merged on read s", "ratio", "cpu ratio",
                                             "target"])
            + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-spark", dest="spark", action="store_false")
    args = parser.parse_args()
    print(run_deletion_vector_bench(args.scale, args.repeat, args.spark))


if __name__ == "__main__":
    main()
