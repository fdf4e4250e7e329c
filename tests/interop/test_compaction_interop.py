"""Compaction and pypaimon: pypaimon reads what we compacted; we compact what pypaimon wrote."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog, Schema
from tests.lakehouse_engine.conftest import read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64()), pa.field("s", pa.string()), pa.field("rk", pa.string())])

PYPAIMON_READ_ALL = """
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = {}
for name in ARGS["tables"]:
    t = cat.get_table(name)
    rb = t.new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    out[name] = sorted([[r["id"], r["dt"], r["v"], r["s"]] for r in rows])
emit(out)
"""


def _batches(seed: int) -> list[pa.Table]:
    import random

    rnd = random.Random(seed)
    out = []
    for c in range(8):
        n = 40
        ids = [rnd.randrange(60) for _ in range(n)]
        out.append(pa.table({
            "id": ids, "dt": [f"d{i % 3}" for i in ids], "v": [c * 1000 + j for j in range(n)],
            "s": [f"value-{c}-{j}-long-enough" if j % 3 else None for j in range(n)],
            "rk": [rnd.choice(["+I", "+U", "+U", "-D"]) for _ in range(n)],
        }, schema=SCHEMA))
    return out


def _model(batches: list[pa.Table]) -> list[list[Any]]:
    state: dict[tuple[int, str], list[Any]] = {}
    for b in batches:
        for r in b.to_pylist():
            key = (r["id"], r["dt"])
            if r["rk"] == "-D":
                state.pop(key, None)
            else:
                state[key] = [r["id"], r["dt"], r["v"], r["s"]]
    return sorted(state.values())


def test_pypaimon_reads_tables_we_compacted(tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    cat = Catalog(str(tmp_path))
    cat.create_database("db")
    batches = _batches(3)
    expected = _model(batches)
    cases = {
        "db.full": ({"bucket": "2", "write-only": "true"}, "full"),
        "db.minor": ({"bucket": "2", "write-only": "true", "num-sorted-run.compaction-trigger": "2"}, "minor"),
        "db.auto": ({"bucket": "3", "num-sorted-run.compaction-trigger": "2"}, None),
    }
    for name, (options, how) in cases.items():
        cat.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                                                          options={"rowkind.field": "rk", **options}))
        table = cat.get_table(name)
        for b in batches:
            write(table, b)
        if how is not None:
            assert table.compact(full=how == "full")
        assert "COMPACT" in {s.commit_kind for s in table.snapshots()}
        ours = sorted([r["id"], r["dt"], r["v"], r["s"]] for r in read(table).to_pylist())
        assert ours == expected, name
    theirs = pypaimon(PYPAIMON_READ_ALL, warehouse=str(tmp_path), tables=list(cases))
    for name in cases:
        assert theirs[name] == expected, name


PYPAIMON_WRITE = """
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64()), pa.field("s", pa.string()), pa.field("rk", pa.string())])
cat.create_table("db.theirs", Schema.from_pyarrow_schema(schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                 options={"bucket": "2"}), False)
t = cat.get_table("db.theirs")
import pyarrow.parquet as pq
for path in ARGS["batches"]:
    wb = t.new_batch_write_builder(); w = wb.new_write(); c = wb.new_commit()
    w.write_arrow(pq.read_table(path).cast(schema)); c.commit(w.prepare_commit()); w.close(); c.close()
rb = t.new_read_builder()
rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
emit(sorted([[r["id"], r["dt"], r["v"], r["s"]] for r in rows]))
"""


def test_we_compact_tables_pypaimon_wrote(tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    import pyarrow.parquet as pq

    paths = []
    for i, b in enumerate(_batches(5)):
        # pypaimon's writer takes every row as an insert: no deletes in its batches.
        b = b.set_column(4, "rk", pa.array(["+I"] * b.num_rows))
        paths.append(str(tmp_path / f"b{i}.parquet"))
        pq.write_table(b, paths[-1])
    before = pypaimon(PYPAIMON_WRITE, warehouse=str(tmp_path / "wh"), batches=paths)
    table = Catalog(str(tmp_path / "wh")).get_table("db.theirs")
    assert {e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot())} == {0}
    assert table.compact(full=True)
    assert set(table.bucket_stats().column("sorted_runs").to_pylist()) == {1}
    ours = sorted([r["id"], r["dt"], r["v"], r["s"]] for r in read(table).to_pylist())
    assert ours == before
    after = pypaimon(PYPAIMON_READ_ALL, warehouse=str(tmp_path / "wh"), tables=["db.theirs"])
    assert after["db.theirs"] == before


MERGE_ENGINES = {
    "db.dedup": {"merge-engine": "deduplicate"},
    "db.partial": {"merge-engine": "partial-update"},
    "db.agg": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
               "fields.s.aggregate-function": "last_non_null_value"},
    "db.first": {"merge-engine": "first-row"},
}


def test_pypaimon_reads_every_merge_engine_after_full_compaction(tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    """pypaimon cannot merge partial-update or aggregation rows itself; after a full compaction
    each bucket is one sorted run of merged rows, which it reads as they are."""
    cat = Catalog(str(tmp_path))
    cat.create_database("db")
    ours = {}
    for name, options in MERGE_ENGINES.items():
        cat.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                                                          options={"bucket": "2", "write-only": "true", **options}))
        table = cat.get_table(name)
        for b in _batches(11):
            # Inserts and updates only: these engines reject or ignore deletes by default.
            write(table, b.set_column(4, "rk", pa.array(["+I"] * b.num_rows)))
        before = sorted([r["id"], r["dt"], r["v"], r["s"]] for r in read(table).to_pylist())
        assert table.compact(full=True)
        ours[name] = sorted([r["id"], r["dt"], r["v"], r["s"]] for r in read(table).to_pylist())
        assert ours[name] == before, name  # compaction merges exactly as merge-on-read does
    assert ours["db.agg"] != ours["db.dedup"] and ours["db.first"] != ours["db.dedup"]
    theirs = pypaimon(PYPAIMON_READ_ALL, warehouse=str(tmp_path), tables=list(MERGE_ENGINES))
    for name in MERGE_ENGINES:
        assert theirs[name] == ours[name], name


def test_pypaimon_reads_the_first_rows_of_our_first_row_table_without_a_compaction(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    """Our first-row writers take level 0 up at every commit without the keys already above it
    (Paimon's first-row lookup compaction): pypaimon reads each key's first row once, with no
    compaction called."""
    cat = Catalog(str(tmp_path))
    cat.create_database("db")
    cat.create_table("db.first", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": "2", "merge-engine": "first-row"}))
    table = cat.get_table("db.first")
    first: dict[tuple[int, str], list[Any]] = {}
    for b in _batches(5):
        b = b.set_column(4, "rk", pa.array(["+I"] * b.num_rows))
        write(table, b)
        for r in b.to_pylist():
            first.setdefault((r["id"], r["dt"]), [r["id"], r["dt"], r["v"], r["s"]])
    levels = {e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot())}
    assert 0 not in levels
    ours = sorted([r["id"], r["dt"], r["v"], r["s"]] for r in read(table).to_pylist())
    assert ours == sorted(first.values())
    theirs = pypaimon(PYPAIMON_READ_ALL, warehouse=str(tmp_path), tables=["db.first"])
    assert theirs["db.first"] == ours
