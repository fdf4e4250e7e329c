"""What the corruption checks cost: parquet page checksums and the HASH index check, on and off.

1. Page checksums: the foundation data (``rows`` rows, sorted by key, in data-file layout) written
   as one parquet file with exactly the options ``DataFileWriter`` uses (zstd level 1, the same
   dictionary columns, no statistics), with and without ``write_page_checksum``, then read whole
   with and without ``page_checksum_verification``. Each figure is the best of ``repeat`` runs,
   on and off alternating so a busy neighbour hurts both alike.
2. HASH index check: a dynamic-bucket table of ``rows`` keys; a writer restores the partition's
   index (reads the HASH index files) with and without checking it against the keys of the
   bucket's data files (``bucket/index_check.py``), the check that catches a flipped hash.

Smoke run: ``.venv/bin/python -m bench.checksum_bench --scale 0.05``.
"""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.bench_data import BENCH_SCHEMA, PRIMARY_KEY, make_bench_data
from bench.engine_bench import write_commit
from bench.machine import best_of_alternating, format_markdown_table
from lakehouse_engine import Catalog, Schema
from lakehouse_engine.bucket import dynamic
from lakehouse_engine.mergetree.parquet_dictionary import dictionary_columns


def _file_layout(data: pa.Table) -> pa.Table:
    data = data.sort_by(PRIMARY_KEY)
    n = data.num_rows
    cols = [data.column(PRIMARY_KEY), pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.zeros(n, dtype=np.int8))] + list(data.columns)
    names = ["_KEY_" + PRIMARY_KEY, "_SEQUENCE_NUMBER", "_VALUE_KIND"] + data.column_names
    return pa.Table.from_arrays(cols, names=names)


def page_checksum_figures(rows: int, repeat: int) -> list[dict[str, Any]]:
    """Write and read times of one data file with page checksums on and off."""
    table = _file_layout(make_bench_data(rows, 1)[0])
    dictionary = dictionary_columns(table)
    files: dict[bool, bytes] = {}

    def write(checksum: bool) -> None:
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd", compression_level=1, write_statistics=False,
                       use_dictionary=dictionary, write_page_checksum=checksum,
                       row_group_size=table.num_rows)
        files[checksum] = sink.getvalue()

    def read(checksum: bool) -> None:
        pq.ParquetFile(pa.BufferReader(files[checksum]),
                       page_checksum_verification=checksum).read(use_threads=True)

    best = best_of_alternating(repeat, {  # on and off alternating; each read follows its write
        "write on": lambda: write(True), "read on": lambda: read(True),
        "write off": lambda: write(False), "read off": lambda: read(False)})
    out = []
    for step in ("write", "read"):
        on, off = best[f"{step} on"], best[f"{step} off"]
        out.append({"step": f"{step} one file of {rows:,} rows", "off s": off, "on s": on,
                    "cost": f"{(on / off - 1) * 100:+.1f}%",
                    "bytes off / on": f"{len(files[False]):,} / {len(files[True]):,}"})
    return out


def index_check_figures(rows: int, repeat: int, workdir: Path) -> dict[str, Any]:
    """Restore time of a dynamic-bucket partition's index with and without the data check."""
    catalog = Catalog(str(workdir / "warehouse"))
    catalog.create_database("bench", ignore_if_exists=True)
    catalog.create_table("bench.dyn", Schema.from_pyarrow_schema(
        BENCH_SCHEMA, primary_keys=[PRIMARY_KEY], options={"bucket": "-1"}))
    table = catalog.get_table("bench.dyn")
    write_commit(table, make_bench_data(rows, 1)[0])
    snapshot = table.latest_snapshot()
    partition = table.store.manifest_io().live_entries(snapshot)[0].partition
    checked = dynamic.check_index_covers_data

    def restore(check: Any) -> None:
        dynamic.check_index_covers_data = check
        dynamic.DynamicBucketAssigner(table.store, snapshot).index(partition)

    try:
        best = best_of_alternating(repeat, {"on": lambda: restore(checked),
                                            "off": lambda: restore(lambda *args: None)})
    finally:
        dynamic.check_index_covers_data = checked
    return {"step": f"restore a dynamic-bucket index of {rows:,} keys (index check)",
            "off s": best["off"], "on s": best["on"], "cost": f"{(best['on'] / best['off'] - 1) * 100:+.0f}%",
            "bytes off / on": "-"}


def run_checksum_bench(scale: float = 1.0, repeat: int = 3) -> str:
    """The Markdown section of `make bench` for the corruption checks."""
    rows = max(10_000, int(1_000_000 * scale))
    workdir = Path(tempfile.mkdtemp(prefix="bench-checksums-"))
    try:
        figures = page_checksum_figures(rows, repeat) + [index_check_figures(rows, repeat, workdir)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    table = format_markdown_table(figures, ["step", "off s", "on s", "cost", "bytes off / on"])
    return ("## Corruption checks: parquet page checksums and the HASH index check\n\n"
            "Best of the repeats, on and off alternating (`bench/checksum_bench.py`). Page "
            "checksums: one data file written and read with the options the engine's writer "
            "uses, `write_page_checksum` / `page_checksum_verification` off and on. Index check: "
            "a writer restoring a partition's HASH index, without and with hashing the keys of "
            "the partition's data files (once per writer and partition).\n\n" + table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(run_checksum_bench(args.scale, args.repeat))


if __name__ == "__main__":
    main()
