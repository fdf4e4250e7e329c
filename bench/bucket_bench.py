"""Bucket-mode benchmarks (issue 4): dynamic-bucket writes, assignment throughput, rescale."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.bench_data import BENCH_SCHEMA, make_bench_data
from bench.engine_bench import write_commit
from bench.machine import best_of_alternating, format_markdown_table
from lakehouse_engine import Catalog, Schema
from lakehouse_engine.bucket.hash_index import PartitionHashIndex


def _table(work: Path, name: str, options: dict[str, str]) -> Any:
    cat = Catalog(str(work))
    cat.create_database("bench", ignore_if_exists=True)
    cat.create_table(f"bench.{name}", Schema.from_pyarrow_schema(BENCH_SCHEMA, primary_keys=["id"], options=options))
    return cat.get_table(f"bench.{name}")


def _write(table: Any, data: pa.Table) -> float:
    t0 = time.perf_counter()
    write_commit(table, data)
    return time.perf_counter() - t0


def _skewed(data: pa.Table, seed: int = 3) -> pa.Table:
    """The same rows with Zipf-like repeated ids (a hot set updated again and again)."""
    rng = np.random.default_rng(seed)
    n = data.num_rows
    ids = (rng.zipf(1.2, n) % n).astype(np.int64)
    return data.set_column(0, "id", pa.array(ids))


def _fixed_and_dynamic(data: pa.Table, repeats: int) -> tuple[dict[str, float], int]:
    """Best seconds of a fixed `bucket = 8` and a dynamic-bucket write of `data` into fresh
    tables, alternated; and the dynamic table's bucket count."""
    work = Path(tempfile.mkdtemp(prefix="bench-buckets-"))
    buckets: list[int] = []

    def fixed() -> None:
        write_commit(_table(work, "fixed", {"bucket": "8", "write-only": "true"}), data)

    def dynamic() -> None:
        table = _table(work, "dyn", {"bucket": "-1", "write-only": "true"})
        write_commit(table, data)
        buckets.append(table.bucket_stats().num_rows)

    def clean_up() -> None:  # its time is not reported: one round's files on disk at a time
        shutil.rmtree(work / "bench.db", ignore_errors=True)

    try:
        return best_of_alternating(repeats, {"fixed": fixed, "dynamic": dynamic, "clean up": clean_up}), buckets[-1]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def dynamic_write_bench(rows: int = 5_000_000, repeats: int = 3) -> list[dict[str, Any]]:
    """Fixed `bucket = 8` and dynamic-bucket writes of the same rows, alternated, best of `repeats`
    each (on a shared machine the two sides then see the same load)."""
    initial, _ = make_bench_data(rows, 10)
    out = []
    for label, data in (("uniform keys", initial), ("skewed keys", _skewed(initial))):
        best, buckets = _fixed_and_dynamic(data, repeats)
        out.append({"data": label, "rows": f"{rows:,}", "fixed bucket=8 s": f"{best['fixed']:.2f}",
                    "dynamic s": f"{best['dynamic']:.2f}",
                    "dynamic / fixed": f"{best['dynamic'] / best['fixed']:.2f}x", "dynamic buckets": buckets})
    return out


def assignment_bench(index_keys: int = 10_000_000, lookups: int = 5_000_000) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    hashes = np.unique(rng.integers(-2**31, 2**31 - 1, int(index_keys * 1.1), dtype=np.int64).astype(np.int32))
    hashes = hashes[:index_keys]
    rng.shuffle(hashes)
    t0 = time.perf_counter()
    idx = PartitionHashIndex(hashes, (np.arange(len(hashes)) % 5000).astype(np.int16))
    build = time.perf_counter() - t0
    queries = np.concatenate([hashes[: lookups // 2],
                              rng.integers(-2**31, 2**31 - 1, lookups - lookups // 2, dtype=np.int64).astype(np.int32)])
    t0 = time.perf_counter()
    idx.lookup(queries)
    lookup = time.perf_counter() - t0
    return {"indexed keys": f"{len(idx):,}", "build s": f"{build:.2f}", "lookups": f"{lookups:,}",
            "lookup s": f"{lookup:.2f}", "keys/s": f"{lookups / lookup:,.0f}",
            "bytes per key": f"{idx.nbytes / len(idx):.1f}"}


def rescale_bench(rows: int = 5_000_000) -> dict[str, Any]:
    initial, _ = make_bench_data(rows, 10)
    work = Path(tempfile.mkdtemp(prefix="bench-rescale-"))
    try:
        table = _table(work, "r", {"bucket": "4", "write-only": "true"})
        _write(table, initial)
        t0 = time.perf_counter()
        table.rescale(16)
        seconds = time.perf_counter() - t0
        rb = table.new_read_builder()
        assert rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows == rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"rows": f"{rows:,}", "4 -> 16 buckets s": f"{seconds:.2f}", "rows/s": f"{rows / seconds:,.0f}"}


def run_bucket_bench(scale: float = 1.0) -> str:
    rows = max(10_000, int(5_000_000 * scale))
    writes = dynamic_write_bench(rows)
    assign = assignment_bench(max(10_000, int(10_000_000 * scale)), max(10_000, int(5_000_000 * scale)))
    rescale = rescale_bench(rows)
    return "\n".join([
        "## Bucket modes: dynamic bucket, assignment, rescale",
        "",
        f"Dynamic-bucket write of {rows:,} rows (`dynamic-bucket.target-row-num` default 2,000,000) next to "
        "the same rows into `bucket = 8`, both `write-only`, alternated, best of 3 each (target of issue 19: "
        "dynamic / fixed within 1.5x on uniform keys):",
        "",
        format_markdown_table(writes, list(writes[0])),
        "",
        "Assignment alone (the NumPy hash index of one partition; target: >= 5M keys/s against a 10M-key "
        "index, <= 16 bytes per key):",
        "",
        format_markdown_table([assign], list(assign)),
        "",
        "Rescale of one unpartitioned table (one OVERWRITE snapshot):",
        "",
        format_markdown_table([rescale], list(rescale)),
        "",
    ])


if __name__ == "__main__":
    print(run_bucket_bench(0.02))
