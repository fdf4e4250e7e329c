"""A deletion-vector table across schema changes (a rename, a widened type, an added column): the
lookup at commit reads the older files by field id in the new schema, so the upsert marks the
right rows, its lookup changelog carries the before-images in the new schema, and a full
compaction keeps the rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.schema_change import SchemaChange
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                    pa.field("n", pa.int32())])
AFTER = [{"id": 1, "w": "a", "n": 1, "x": None}, {"id": 2, "w": "b2", "n": 20, "x": "x2"},
         {"id": 3, "w": "c", "n": 3, "x": None}, {"id": 4, "w": None, "n": 40, "x": "x4"}]


@pytest.mark.parametrize(("engine", "producer"), [("deduplicate", "lookup"), ("partial-update", "none")])
def test_an_upsert_after_a_rename_a_wider_type_and_a_new_column(catalog: Catalog, engine: str, producer: str) -> None:
    create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "deletion-vectors.enabled": "true", "merge-engine": engine, "changelog-producer": producer})
    write(catalog.get_table("db.t"), pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"],
                                               "n": pa.array([1, 2, 3], pa.int32())}))
    catalog.alter_table("db.t", [SchemaChange.rename_column("v", "w"), SchemaChange.update_column_type("n", "BIGINT"),
                                 SchemaChange.add_column("x", "STRING")])
    t = catalog.get_table("db.t")
    # partial-update: 4's w is null and stays null (no older row); 2's w is set
    write(t, pa.table({"id": [2, 4], "w": ["b2", None], "n": pa.array([20, 40], pa.int64()), "x": ["x2", "x4"]}))
    assert rows(read(t), "id") == AFTER
    if producer == "lookup":
        got = [(r["_row_kind"], r["id"], r["w"], r["n"], r["x"]) for r in t.changes(0).to_pylist()]
        assert got[3:] == [("-U", 2, "b", 2, None), ("+U", 2, "b2", 20, "x2"), ("+I", 4, None, 40, "x4")]
    t.compact(full=True)
    assert rows(read(t), "id") == AFTER
