"""pypaimon 2.1.0 reads our branches (`db.t$branch_b`, `Identifier(..., branch=...)`, the `branch`
option) and main after our fast-forward, and lists them; one subprocess does all its work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])

PYPAIMON_BRANCHES = """
from pypaimon.common.identifier import Identifier
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})

def rows(table):
    rb = table.new_read_builder()
    out = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted([r["id"], r["v"]] for r in out.to_pylist()) if out is not None else []

results = {}
reads = {
    "branch by name": lambda: catalog.get_table("db.t$branch_b"),
    "branch by identifier": lambda: catalog.get_table(Identifier("db", "t", branch="b")),
    "branch by option": lambda: catalog.get_table("db.t").copy({"branch": "b"}),
    "main": lambda: catalog.get_table("db.t"),
    "forwarded main": lambda: catalog.get_table("db.forwarded"),
}
for name, load in reads.items():
    try:
        results[name] = rows(load())
    except Exception as e:
        results[name] = "ERROR " + repr(e)
try:
    results["branches"] = sorted(catalog.get_table("db.t").branch_manager().branches())
except Exception as e:
    results["branches"] = "ERROR " + repr(e)
emit(results)
"""


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def test_pypaimon_reads_our_branches_and_main_after_our_fast_forward(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    for name in ("t", "forwarded"):
        table = create_table(catalog, name, SCHEMA, primary_keys=["id"], options={"bucket": 2})
        write(table, _rows([1, 2, 3], 1))
        table.create_tag("t1", 1)
        write(table, _rows([1], 2))
        table.create_branch("b", "t1")
        branch = catalog.get_table(f"db.{name}$branch_b")
        write(branch, _rows([3, 4], 7))
        branch.compact(full=True)
    catalog.fast_forward("db.forwarded", "b")
    got = pypaimon(PYPAIMON_BRANCHES, warehouse=str(tmp_path / "wh"))
    branch_rows = [[1, 1], [2, 1], [3, 7], [4, 7]]
    assert got == {"branch by name": branch_rows, "branch by identifier": branch_rows,
                   "branch by option": branch_rows, "main": [[1, 2], [2, 1], [3, 1]],
                   "forwarded main": branch_rows, "branches": ["b"]}
