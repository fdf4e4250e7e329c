"""Plain-pyarrow baseline: the cheapest possible "sorted files + last writer wins" store.

No metadata, no snapshots, no merge-on-read: every upsert rewrites everything.  It is the
floor a primary-key table format has to be compared with.

Run directly: ``.venv/bin/python -m bench.pyarrow_baseline --rows 100000 --upsert 10000``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

NUM_FILES = 4
KEY = "id"


def _bucket_of(ids: pa.ChunkedArray | pa.Array, num_files: int) -> np.ndarray:
    """A cheap, deterministic bucket number per id (ids are non-negative int64)."""
    return (np.asarray(ids.to_numpy()) % num_files).astype(np.int64)


def _write_buckets(table: pa.Table, directory: Path, num_files: int) -> list[Path]:
    """Sort ``table`` by key and write one Parquet file per bucket (``num_files`` files)."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.parquet"):
        old.unlink()
    table = table.sort_by(KEY)
    buckets = pa.array(_bucket_of(table.column(KEY), num_files))
    paths = []
    for b in range(num_files):
        part = table.filter(pc.equal(buckets, b))
        path = directory / f"bucket-{b}.parquet"
        pq.write_table(part, path)
        paths.append(path)
    return paths


def _dedup_keep_last(table: pa.Table) -> pa.Table:
    """Sort by (key, arrival order) and keep the last row of every key, vectorised."""
    seq = pa.array(np.arange(table.num_rows, dtype=np.int64))
    table = table.append_column("__seq", seq)
    table = table.sort_by([(KEY, "ascending"), ("__seq", "ascending")])
    ids = table.column(KEY).to_numpy()
    keep = np.ones(len(ids), dtype=bool)
    if len(ids) > 1:
        keep[:-1] = ids[:-1] != ids[1:]
    return table.filter(pa.array(keep)).drop_columns(["__seq"])


def run_pyarrow_baseline(
    initial: pa.Table, upsert: pa.Table, tmpdir: str | Path, num_files: int = NUM_FILES
) -> dict:
    """Time write / upsert / read with plain pyarrow; returns seconds per step and row counts."""
    directory = Path(tmpdir) / "pyarrow_baseline"

    t0 = time.perf_counter()
    _write_buckets(initial, directory, num_files)
    t1 = time.perf_counter()

    existing = pq.read_table(directory, schema=initial.schema)
    merged = _dedup_keep_last(pa.concat_tables([existing, upsert.cast(initial.schema)]))
    _write_buckets(merged, directory, num_files)
    t2 = time.perf_counter()

    result = pq.read_table(directory, schema=initial.schema)
    t3 = time.perf_counter()

    return {
        "engine": "pyarrow",
        "pyarrow": pa.__version__,
        "rows": initial.num_rows,
        "upsert": upsert.num_rows,
        "write_s": t1 - t0,
        "upsert_s": t2 - t1,
        "read_s": t3 - t2,
        "result_rows": result.num_rows,
    }


def main(argv: list[str] | None = None) -> int:
    from bench.bench_data import make_bench_data

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--upsert", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    initial, upsert = make_bench_data(args.rows, args.upsert, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-pyarrow-") as tmp:
        result = run_pyarrow_baseline(initial, upsert, tmp)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
