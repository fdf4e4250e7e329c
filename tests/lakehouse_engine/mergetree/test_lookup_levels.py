"""A `lookup` table's partial-update or aggregation engine never leaves a key in two levels above 0
(`mergetree.compact.lookup_levels`): Paimon 0.9's LookupMergeFunction reads only the newest record
above level 0 of a key. Seeded random writes, write-only writes and compactions, checked after each
step against the levels' files and a model of the merged rows."""

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
    bucket_dir = table.path_factory.bucket_dir([], 0)
    held: Counter[int] = Counter()
    for e in table.store.manifest_io().live_entries(table.latest_snapshot()):
        if e.file.level > 0:
            held.update(pq.read_table(f"{bucket_dir}/{e.file.file_name}", columns=["id"]).column("id").to_pylist())
    return held


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("seed", range(3))
def test_no_key_of_a_lookup_merging_table_sits_in_two_levels_above_0(catalog: Catalog, engine: str,
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
        assert [k for k, c in _keys_above_level0(t).items() if c > 1] == [], op
        assert read(t).sort_by("id").to_pylist() == [model[k] for k in sorted(model)]
