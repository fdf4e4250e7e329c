"""A `lookup` table's partial-update or aggregation engine writes Paimon's layout
(`mergetree.compact.lookup_levels`): a compaction writes each key's whole merged value, merged with
the key's record below its output, and leaves that older record where it is, so a key may sit in
two levels above 0, the newest of them its merged value (what Paimon 0.9's LookupMergeFunction
reads). Seeded random writes, write-only writes and compactions, checked after each step against
the levels' files and a model of the merged rows."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("a", pa.string()),
                    pa.field("n", pa.int64())])

ENGINES = {
    "aggregation": {"merge-engine": "aggregation", "fields.a.aggregate-function": "last_non_null_value",
                    "fields.n.aggregate-function": "sum"},
    "partial-update": {"merge-engine": "partial-update"},
}


def _keys_above_level0(table: Any) -> Counter[int]:
    """How many levels above 0 hold each key (a level's files do not overlap: one count per level)."""
    held: Counter[int] = Counter()
    for level, rows in _files(table):
        if level > 0:
            held.update(rows.column("id").to_pylist())
    return held


def _files(table: Any) -> list[tuple[int, pa.Table]]:
    bucket_dir = table.path_factory.bucket_dir([], 0)
    return [(e.file.level, pq.read_table(f"{bucket_dir}/{e.file.file_name}", columns=["id", "a", "n"]))
            for e in table.store.manifest_io().live_entries(table.latest_snapshot())]


def _newest_above_level0(table: Any) -> dict[int, dict[str, Any]]:
    """Per key not in level 0, its record at the lowest level above 0 holding it (the bytes written)."""
    files = _files(table)
    in_level0 = {k for level, rows in files if level == 0 for k in rows.column("id").to_pylist()}
    newest: dict[int, tuple[int, dict[str, Any]]] = {}
    for level, rows in files:
        for r in rows.to_pylist() if level > 0 else []:
            if r["id"] not in in_level0 and (r["id"] not in newest or level < newest[r["id"]][0]):
                newest[r["id"]] = (level, r)
    return {k: r for k, (_, r) in newest.items()}


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("seed", range(3))
def test_a_lookup_merging_table_writes_each_keys_merged_value_above_level_0(catalog: Catalog, engine: str,
                                                                           seed: int) -> None:
    rng = random.Random(seed)
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "lookup",
                              "num-sorted-run.compaction-trigger": str(rng.choice([2, 3, 5])), **ENGINES[engine]})
    write_only = t.copy({"write-only": "true"})
    model: dict[int, dict[str, Any]] = {}
    for _ in range(12):
        op = rng.choice(["write", "write", "write-only", "level0", "compact"])
        if op in ("write", "write-only"):
            ids = rng.sample(range(40), rng.randint(1, 15))
            rows: list[dict[str, Any]] = [{"id": i, "a": rng.choice([None, f"s{rng.randint(0, 9)}"]),
                     "n": rng.randint(1, 9) if engine == "aggregation" else rng.choice([None, rng.randint(1, 9)])}
                    for i in ids]
            write(t if op == "write" else write_only, pa.Table.from_pylist(rows, schema=SCHEMA))
            for r in rows:
                old = model.get(r["id"], {"id": r["id"], "a": None, "n": None})
                n = (old["n"] or 0) + r["n"] if engine == "aggregation" else r["n"] if r["n"] is not None else old["n"]
                model[r["id"]] = {"id": r["id"], "a": r["a"] if r["a"] is not None else old["a"], "n": n}
        elif op == "level0":
            t.compact(level0_only=True)
        else:
            t.compact()
        # The newest record above level 0 of a key is its whole merged value (Paimon's layout).
        assert _newest_above_level0(t) == {k: model[k] for k in _newest_above_level0(t)}, op
        assert read(t).sort_by("id").to_pylist() == [model[k] for k in sorted(model)]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_commit_writes_the_keys_merged_value_beside_the_older_level(catalog: Catalog, engine: str) -> None:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "lookup", **ENGINES[engine]})
    ids = list(range(1, 51))
    write(t, pa.table({"id": ids, "a": [f"x{i}" for i in ids], "n": [1] * 50}, schema=SCHEMA))  # the top run
    write(t, pa.table({"id": [1], "a": [None], "n": [2]}, schema=SCHEMA))  # far smaller: not merged with it
    # Paimon's layout: key 1 at level 4 (its merged value, looked up in level 5) and level 5.
    # Before: the commit's compaction rewrote the whole top run (one file, level 5).
    assert sorted((level, rows.num_rows) for level, rows in _files(t)) == [(4, 1), (5, 50)]
    merged = {"id": 1, "a": "x1", "n": 3 if engine == "aggregation" else 2}
    assert [rows.to_pylist() for level, rows in _files(t) if level == 4] == [[merged]]
    assert read(t).sort_by("id").to_pylist()[0] == merged
