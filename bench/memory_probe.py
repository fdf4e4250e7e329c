"""A child process for the bounded-memory tests (tests/lakehouse_engine/mergetree) and the scale
bench: it runs one merge path on a table and prints, as JSON, its resident memory before the path
ran and its peak (VmHWM) after.

    python -m bench.memory_probe prepare WAREHOUSE ROWS RUNS [OPTIONS_JSON [t,p,d]]
    python -m bench.memory_probe PATH WAREHOUSE [OPTIONS_JSON]

`prepare` writes `ROWS` rows as `RUNS` sorted runs of one bucket whose key ranges all overlap
(run i holds the keys i, i + RUNS, i + 2 RUNS, ...; every key of run 0 is written again by the
last run, so the merge has work to do). The paths: `read` (merge-on-read through
`to_arrow_batch_reader`, batches dropped as they come), `split` (a split read range by range, as
the Spark data source reads it), `compact` (a full dedicated compaction),
`task` (the compact task a Spark executor runs), `writer` (a writer's full compaction at commit),
`rescale` (into two buckets), `postpone` (a postpone-bucket table's compaction), `write` (one
batch of ROWS rows written through a small write buffer), `upsert` (option `probe.rows` rows
updating run 1's keys, written in slices as `prepare` writes and committed once), `dv-compact`
and `dv-full` (table `d`, with `deletion-vectors.enabled`: its level-0 runs compacted up, and a
full compaction). `prepare` writes table `t`, and `p` (postpone bucket) and `d` (deletion vectors)
when named.

A path's `seconds` are the engine's: the probe's own generation of input rows (NumPy and
pyarrow building the batches `prepare`, `write` and `upsert` hand to the writer) is timed apart as
`input_seconds`; `cpu_seconds` are the process's CPU seconds (every thread) over the path, less
the generation's. Its memory is not apart: the batch being written is part of the peak, as a
caller's batch is.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
import pyarrow as pa


def status_kib(field: str) -> int:
    """A `/proc/self/status` memory field (VmRSS, VmHWM) in KiB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


# 1024 distinct 96-character names: rows about 140 bytes wide in memory, small on disk.
_NAMES = pa.array([f"{i:04d}-" + "abcdefghij" * 9 + "x" for i in range(1024)])


def rows(start: int, step: int, n: int, tag: int) -> pa.Table:
    """`n` rows with keys start, start + step, ...: an int key, two numbers and a name."""
    keys = start + step * np.arange(n, dtype=np.int64)
    return pa.table({
        "id": keys,
        "v": np.full(n, tag, dtype=np.int64),
        "x": keys.astype(np.float64) * 0.5,
        "s": _NAMES.take(pa.array(keys % len(_NAMES))),
    })


SLICE_ROWS = 2_000_000


class InputClock:
    """The seconds spent generating input rows, kept apart from the step's own time: at 2M rows a
    slice's strings are ~190 MiB of fresh memory, costlier per row than a small slice's."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def rows(self, start: int, step: int, n: int, tag: int) -> pa.Table:
        """`rows(start, step, n, tag)`, timed (wall and this process's CPU)."""
        began, cpu = time.perf_counter(), time.process_time()
        try:
            return rows(start, step, n, tag)
        finally:
            self.seconds += time.perf_counter() - began
            self.cpu_seconds += time.process_time() - cpu


def _catalog(warehouse: str) -> Any:
    from lakehouse_engine import Catalog

    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    return catalog


def prepare(warehouse: str, total: int, runs: int, options: dict[str, str],
            tables: str = "t", clock: InputClock | None = None) -> None:
    """Table `t` (one bucket) and, when `tables` names it, `p` (postpone bucket) of that data;
    `clock` times the generation of the rows."""
    from lakehouse_engine import Schema

    clock = clock or InputClock()
    catalog = _catalog(warehouse)
    schema = rows(0, 1, 1, 0).schema
    for name, bucket, extra in (("t", "1", {}), ("p", "-2", {}), ("d", "1", {"deletion-vectors.enabled": "true"})):
        if name not in tables.split(","):
            continue
        opts = {"bucket": bucket, "write-only": "true", **extra, **options}
        catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
            schema, primary_keys=["id"], options=opts), ignore_if_exists=True)
        table = catalog.get_table(f"db.{name}")
        per_run = total // runs
        for i in range(runs):
            # The last run rewrites run 0's keys: updates as well as interleaved inserts.
            start = 0 if i == runs - 1 and runs > 1 else i
            wb = table.new_batch_write_builder()
            w, c = wb.new_write(), wb.new_commit()
            # In slices of consecutive keys: a slice's files hold a key range of their own, so
            # the commit stays one sorted run however many files its buffer flushes.
            for lo in range(0, per_run, SLICE_ROWS):
                w.write_arrow(clock.rows(start + lo * runs, runs, min(SLICE_ROWS, per_run - lo), i))
            c.commit(w.prepare_commit())
            w.close()
            c.close()


def run(path: str, warehouse: str, options: dict[str, str]) -> dict[str, Any]:
    from lakehouse_engine.compact.table_compact import plan_compaction, run_compact_task

    catalog = _catalog(warehouse)
    name = {"postpone": "db.p", "dv-compact": "db.d", "dv-full": "db.d"}.get(path, "db.t")
    table = catalog.get_table(name).copy(options)
    batch = rows(0, 1, int(options.get("probe.rows", "0")), 9) if path == "write" else None
    baseline = status_kib("VmRSS")
    clock = InputClock()
    started, cpu = time.perf_counter(), time.process_time()
    count = 0
    if path == "read":
        rb = table.new_read_builder()
        for b in rb.new_read().to_arrow_batch_reader(rb.new_scan().plan().splits()):
            count += b.num_rows
    elif path == "split":  # what the Spark data source's reader runs on an executor
        rb = table.new_read_builder()
        read = rb.new_read()
        for split in rb.new_scan().plan().splits():
            for part in read.read_split_ranges(split):
                count += part.num_rows
    elif path == "compact":
        table.compact(full=True)
    elif path == "task":
        for task in plan_compaction(table.store, full=True):
            message = run_compact_task(table.store, task)
            count += sum(f.row_count for f in message.compact_after) if message else 0
    elif path == "writer":
        w = table.copy({"write-only": "false", "full-compaction.delta-commits": "1"})
        wb = w.new_batch_write_builder()
        writer, commit = wb.new_write(), wb.new_commit()
        writer.write_arrow(rows(0, 1, 1, 7))
        commit.commit(writer.prepare_commit())
    elif path in ("dv-compact", "dv-full"):  # a DV table's level 0 compacted up, vectors applied
        table.compact(full=path == "dv-full")
    elif path == "rescale":
        table.rescale(2)
    elif path == "postpone":
        table.compact()
    elif path == "write":
        assert batch is not None
        wb = table.copy({"write-only": "true"}).new_batch_write_builder()
        writer, commit = wb.new_write(), wb.new_commit()
        writer.write_arrow(batch)
        commit.commit(writer.prepare_commit())
        count = batch.num_rows
    elif path == "upsert":
        n, step = int(options["probe.rows"]), int(options.get("probe.runs", "5"))
        wb = table.copy({"write-only": "true"}).new_batch_write_builder()
        writer, commit = wb.new_write(), wb.new_commit()
        for lo in range(0, n, SLICE_ROWS):
            writer.write_arrow(clock.rows(1 + lo * step, step, min(SLICE_ROWS, n - lo), 8))
        commit.commit(writer.prepare_commit())
        writer.close()
        commit.close()
        count = n
    else:
        raise SystemExit(f"unknown path {path}")
    seconds = time.perf_counter() - started - clock.seconds
    return {"path": path, "baseline_kib": baseline, "peak_kib": status_kib("VmHWM"),
            "seconds": seconds, "cpu_seconds": time.process_time() - cpu - clock.cpu_seconds,
            "input_seconds": clock.seconds, "rows": count}


def main(argv: list[str]) -> None:
    if argv[0] == "prepare":
        # The engine imported and the catalog opened before the baseline, as for the other paths.
        _catalog(argv[1])
        baseline = status_kib("VmRSS")
        clock = InputClock()
        started, cpu = time.perf_counter(), time.process_time()
        prepare(argv[1], int(argv[2]), int(argv[3]), json.loads(argv[4]) if len(argv) > 4 else {},
                argv[5] if len(argv) > 5 else "t", clock)
        print(json.dumps({"path": "prepare", "baseline_kib": baseline, "peak_kib": status_kib("VmHWM"),
                          "seconds": time.perf_counter() - started - clock.seconds,
                          "cpu_seconds": time.process_time() - cpu - clock.cpu_seconds,
                          "input_seconds": clock.seconds, "rows": int(argv[2])}))
        return
    print(json.dumps(run(argv[0], argv[1], json.loads(argv[2]) if len(argv) > 2 else {})))


if __name__ == "__main__":
    main(sys.argv[1:])
