"""Our engine on the foundation benchmark: initial write, upsert, full merged read."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.bench_data import BENCH_SCHEMA, PRIMARY_KEY, expected_merged
from lakehouse_engine import Catalog, Schema
from lakehouse_engine.table import FileStoreTable


def write_commit(table: FileStoreTable, data: pa.Table) -> None:
    """Write `data` to `table` and commit it as one batch commit."""
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def run_engine(initial: pa.Table, upsert: pa.Table, workdir: Path, verify: bool = True) -> dict[str, Any]:
    """Seconds per step for our engine on a fresh `bucket = 4` table under `workdir`."""
    catalog = Catalog(str(workdir / "warehouse"))
    catalog.create_database("bench", ignore_if_exists=True)
    catalog.create_table("bench.orders", Schema.from_pyarrow_schema(
        BENCH_SCHEMA, primary_keys=[PRIMARY_KEY], options={"bucket": "4"}))
    table = catalog.get_table("bench.orders")
    t0 = time.perf_counter()
    write_commit(table, initial)
    t1 = time.perf_counter()
    write_commit(table, upsert)
    t2 = time.perf_counter()
    rb = table.new_read_builder()
    merged = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    t3 = time.perf_counter()
    result: dict[str, Any] = {"engine": "lakehouse_engine", "write_s": t1 - t0, "upsert_s": t2 - t1,
                              "read_s": t3 - t2, "result_rows": merged.num_rows}
    if verify:
        expected = expected_merged(initial, upsert)
        result["verified"] = bool(merged.sort_by(PRIMARY_KEY).cast(expected.schema).equals(expected))
    return result
