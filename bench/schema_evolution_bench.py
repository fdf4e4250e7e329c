"""What reading an evolved table costs: files of 5 schema versions against the same rows under one.

Two primary-key tables (`bucket` = 4, `write-only` so no compaction folds the files together)
get the same ``rows`` rows in 5 commits of distinct ids. The first is altered between commits
(add a column, rename one, widen INT to BIGINT, widen FLOAT to DOUBLE and drop one), so its
files span schema versions 0 to 4 and every read maps columns by field id; the second is
created with the final schema and reads every file as it is. Both are read whole (merge-on-read
of 5 sorted runs per bucket); each figure is the best of ``repeat`` reads, alternating.

Smoke run: ``.venv/bin/python -m bench.schema_evolution_bench --scale 0.05``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.engine_bench import write_commit
from bench.machine import best_of_alternating, format_markdown_table
from lakehouse_engine import Catalog, Schema, SchemaChange
from lakehouse_engine.table import FileStoreTable

OPTIONS = {"bucket": "4", "write-only": "true"}
V0 = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                pa.field("qty", pa.int32()), pa.field("price", pa.float32()), pa.field("ts", pa.timestamp("us"))])
FINAL = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("label", pa.string()),
                   pa.field("qty", pa.int64()), pa.field("price", pa.float64()), pa.field("note", pa.string())])
# Schema version of each commit's rows, and the changes made before the next commit.
CHANGES: list[list[SchemaChange]] = [
    [SchemaChange.add_column("note", "STRING")],
    [SchemaChange.rename_column("name", "label")],
    [SchemaChange.update_column_type("qty", "BIGINT")],
    [SchemaChange.update_column_type("price", "DOUBLE"), SchemaChange.drop_column("ts")],
]


def _chunk(start: int, n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(np.arange(start, start + n, dtype=np.int64))
    return {"id": ids, "name": pa.array([f"name-{i % 997:05d}" for i in range(n)]),
            "qty": rng.integers(0, 1000, n, dtype=np.int32),
            "price": rng.random(n, dtype=np.float32),
            # The first commit predates `note` in the evolved table: null in both.
            "note": pa.array([None if seed == 0 else f"n{i % 13}" for i in range(n)], pa.string()),
            "ts": pa.array(np.full(n, 1_793_491_200_000_000, dtype="datetime64[us]"))}


def _batch(columns: dict[str, Any], schema: pa.Schema) -> pa.Table:
    renamed = {**columns, "label": columns["name"]}
    return pa.table({f.name: pa.array(renamed[f.name]).cast(f.type) for f in schema}, schema=schema)


def build_tables(rows: int, warehouse: Path) -> tuple[FileStoreTable, FileStoreTable]:
    """(the table of 5 schema versions, the table of one), holding the same rows."""
    catalog = Catalog(str(warehouse))
    catalog.create_database("bench", ignore_if_exists=True)
    catalog.create_table("bench.evolved", Schema.from_pyarrow_schema(V0, primary_keys=["id"], options=OPTIONS))
    catalog.create_table("bench.single", Schema.from_pyarrow_schema(FINAL, primary_keys=["id"], options=OPTIONS))
    per = rows // 5
    for version in range(5):
        chunk = _chunk(version * per, per, version)
        evolved = catalog.get_table("bench.evolved")
        write_commit(evolved, _batch(chunk, evolved.schema.arrow_schema()))
        write_commit(catalog.get_table("bench.single"), _batch(chunk, FINAL))
        if version < len(CHANGES):
            catalog.alter_table("bench.evolved", CHANGES[version])
    return catalog.get_table("bench.evolved"), catalog.get_table("bench.single")


def _read(table: FileStoreTable) -> pa.Table:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def schema_evolution_figures(rows: int, repeat: int, workdir: Path) -> list[dict[str, Any]]:
    evolved, single = build_tables(rows, workdir / "warehouse")
    versions = {e.file.schema_id for e in evolved.store.manifest_io().live_entries(evolved.latest_snapshot())}
    assert versions == {0, 1, 2, 3, 4}, versions
    a, b = _read(evolved), _read(single)
    assert a.num_rows == b.num_rows == rows // 5 * 5 and a.schema == b.schema
    best = best_of_alternating(repeat, {"single": lambda: _read(single), "evolved": lambda: _read(evolved)})
    one, five = best["single"], best["evolved"]
    return [{"read": f"{a.num_rows:,} rows, files of 1 schema version", "best s": f"{one:.3f}", "ratio": "1.00x"},
            {"read": f"{a.num_rows:,} rows, files of 5 schema versions", "best s": f"{five:.3f}",
             "ratio": f"{five / one:.2f}x"}]


def run_schema_evolution_bench(scale: float = 1.0, repeat: int = 3) -> str:
    """The Markdown section of `make bench` for reads across schema versions."""
    rows = max(10_000, int(1_000_000 * scale))
    workdir = Path(tempfile.mkdtemp(prefix="bench-schema-"))
    try:
        figures = schema_evolution_figures(rows, repeat, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return ("## Schema evolution: reading files of 5 schema versions\n\n"
            "The same rows in two `bucket` = 4 tables of 5 commits each (`write-only`, so each "
            "bucket reads 5 sorted runs merged): one altered between commits (add, rename, widen "
            "INT to BIGINT, widen FLOAT to DOUBLE and drop), whose files the reader maps by field "
            "id; one created with the final schema. Best of the repeats, alternating "
            "(`bench/schema_evolution_bench.py`). The target is at most 1.2x.\n\n"
            + format_markdown_table(figures, ["read", "best s", "ratio"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(run_schema_evolution_bench(args.scale, args.repeat))


if __name__ == "__main__":
    main()
