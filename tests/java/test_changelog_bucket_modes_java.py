"""Paimon 0.9 (Java) reads the changelog we write for a cross-partition table (a key moving
partitions: `-D` in the old, `+I` in the new) as our streaming scan reads it, plan by plan.
(Postpone-bucket tables came after 0.9: Java 0.9 cannot judge them.)"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.java.conftest import Judge, our_stream_plans
from tests.java.test_changes_java import _java
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    pa.field("v", pa.string()), pa.field("k", pa.string())])


def _ours(table: Any) -> list[tuple[int, list[list[Any]]]]:
    return our_stream_plans(table, ["id", "p", "v"])


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_java_reads_our_cross_partition_changelog(tmp_path: Any, judge: Judge, producer: str) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "x", SCHEMA, primary_keys=["id"], partition_keys=["p"],
                     options={"bucket": "-1", "rowkind.field": "k", "changelog-producer": producer})
    for rows in ([(1, "x", "a", "+I"), (2, "x", "b", "+I"), (3, "y", "c", "+I")],
                 [(1, "y", "a2", "+I"), (2, "x", "b2", "+I")],
                 [(3, "x", "c2", "+I"), (2, "y", None, "-D")]):
        write(t, pa.Table.from_pylist([{"id": i, "p": p, "v": v, "k": k} for i, p, v, k in rows], schema=SCHEMA))
    ours = _ours(t)
    moved = [r for _, rows in ours for r in rows if r[1] == 1]
    assert ["-D", 1, "x"] in [r[:3] for r in moved] and ["+I", 1, "y", "a2"] in moved
    [answer] = judge([{"op": "stream", "warehouse": str(tmp_path / "warehouse"), "table": "db.x",
                       "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}}])
    assert _java(answer, width=4) == ours
