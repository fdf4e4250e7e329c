"""pypaimon 2.1.0 and Paimon's layout of a `lookup` partial-update or aggregation table.

Our compactions of such a table write Paimon's layout (`mergetree.compact.lookup_levels`): a key's
merged value at a level above 0 beside its older record in a higher level, read with Paimon's
LookupMergeFunction (per key the level-0 records and only the newest record above level 0).
pypaimon 2.1.0 has no LookupMergeFunction: what it reads of a key in two levels above 0 is its own
merge of every level (docs/compatibility.md). Where no key sits in two levels above 0 (after a full
compaction) it reads what we read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, Schema
from tests.lakehouse_engine.conftest import read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("a", pa.string()),
                    pa.field("n", pa.int64())])
ENGINES = {
    "db.agg": {"merge-engine": "aggregation", "fields.a.aggregate-function": "last_non_null_value",
               "fields.n.aggregate-function": "sum"},
    "db.partial": {"merge-engine": "partial-update"},
}
PYPAIMON_READ = """
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = {}
for name in ARGS["tables"]:
    rb = cat.get_table(name).new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    out[name] = sorted([r["id"], r["a"], r["n"]] for r in rows)
emit(out)
"""


def _levels(table: Any) -> list[int]:
    return sorted(e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot()))


def _ours(table: Any) -> list[list[Any]]:
    return sorted([r["id"], r["a"], r["n"]] for r in read(table).to_pylist())


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_pypaimon_reads_a_key_in_two_levels_above_0_as_its_merge_of_every_level(
        tmp_path: Path, pypaimon: Callable[..., Any], name: str) -> None:
    cat = Catalog(str(tmp_path))
    cat.create_database("db")
    cat.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "changelog-producer": "lookup", **ENGINES[name]}))
    t = cat.get_table(name)
    ids = list(range(1, 51))
    write(t, pa.table({"id": ids, "a": [f"x{i}" for i in ids], "n": [1] * 50}, schema=SCHEMA))
    write(t, pa.table({"id": [1], "a": [None], "n": [2]}, schema=SCHEMA))
    assert _levels(t) == [4, 5]  # key 1: its merged value at level 4, the older record at level 5
    ours = _ours(t)
    key1 = [1, "x1", 3 if name == "db.agg" else 2]
    assert ours[0] == key1
    theirs = pypaimon(PYPAIMON_READ, warehouse=str(tmp_path), tables=[name])[name]
    # Every other key sits in one level: pypaimon reads what we read.
    assert theirs[1:] == ours[1:]
    # Key 1: pypaimon's merge of both levels (level 5's x1/1, then level 4's merged x1/3).
    full_merge = [1, "x1", 4] if name == "db.agg" else key1
    assert theirs[0] == full_merge
    assert t.compact(full=True)
    assert _levels(t) == [5]
    assert pypaimon(PYPAIMON_READ, warehouse=str(tmp_path), tables=[name])[name] == _ours(t) == ours
