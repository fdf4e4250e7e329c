"""Evolved tables across engines: pypaimon 2.1.0 reads tables we altered (every change kind, with
files written under each schema version, before and after our compaction), and we read tables
pypaimon altered with its own `alter_table`."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, Move, Schema, SchemaChange
from tests.lakehouse_engine.conftest import write

BASE = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("qty", pa.int32()),
    pa.field("price", pa.float32()),
    pa.field("amount", pa.decimal128(8, 2)),
    pa.field("name", pa.string()),
    pa.field("gone", pa.string()),
])

PYPAIMON_READ_ALL = """
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = {}
for name in ARGS["tables"]:
    t = catalog.get_table(name)
    rb = t.new_read_builder()
    arrow = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    out[name] = {"columns": arrow.column_names,
                 "types": [str(f.type) for f in arrow.schema],
                 "rows": sorted(arrow.to_pylist(), key=lambda r: (r["dt"], r["id"]))}
emit(out)
"""


def _canonical(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSON-comparable rows: decimals as strings, floats rounded."""
    out = []
    for r in rows:
        out.append({k: (str(v) if isinstance(v, Decimal) else round(v, 4) if isinstance(v, float) else v)
                    for k, v in r.items()})
    return sorted(out, key=lambda r: (r["dt"], r["id"]))


def evolve_ours(catalog: Catalog, name: str, options: dict[str, str]) -> list[dict[str, Any]]:
    """A table written under five schema versions, one change kind after another; its rows."""
    ident = f"db.{name}"
    catalog.create_table(ident, Schema.from_pyarrow_schema(BASE, primary_keys=["id", "dt"],
                                                           partition_keys=["dt"], options=options))
    t = catalog.get_table(ident)
    write(t, pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"], "qty": pa.array([1, 2, 3], pa.int32()),
                       "price": pa.array([1.5, 2.5, 3.5], pa.float32()),
                       "amount": [Decimal("1.10"), Decimal("2.20"), None], "name": ["n1", "n2", "n3"],
                       "gone": ["g1", "g2", "g3"]}, schema=BASE))
    catalog.alter_table(ident, [SchemaChange.add_column("color", "STRING", "paint", Move.after("color", "qty")),
                                SchemaChange.set_option("snapshot.num-retained.min", "5")])
    t = catalog.get_table(ident)
    write(t, pa.table({"id": [4], "dt": ["a"], "qty": pa.array([4], pa.int32()), "color": ["red"],
                       "price": pa.array([4.5], pa.float32()), "amount": [Decimal("4.40")],
                       "name": ["n4"], "gone": ["g4"]}, schema=t.schema.arrow_schema()))
    catalog.alter_table(ident, [SchemaChange.rename_column("name", "label"),
                                SchemaChange.drop_column("gone"),
                                SchemaChange.update_column_comment("label", "renamed")])
    t = catalog.get_table(ident)
    write(t, pa.table({"id": [2], "dt": ["a"], "qty": pa.array([20], pa.int32()), "color": ["blue"],
                       "price": pa.array([20.5], pa.float32()), "amount": [Decimal("20.20")],
                       "label": ["two"]}, schema=t.schema.arrow_schema()))
    catalog.alter_table(ident, [SchemaChange.update_column_type("qty", "BIGINT"),
                                SchemaChange.update_column_type("price", "DOUBLE"),
                                SchemaChange.update_column_type("amount", "DECIMAL(12, 3)"),
                                SchemaChange.update_column_position(Move.first("label"))])
    t = catalog.get_table(ident)
    write(t, pa.table({"label": ["n5"], "id": [5], "dt": ["b"], "qty": [2**40], "color": [None],
                       "price": [5.25], "amount": [Decimal("5.555")]}, schema=t.schema.arrow_schema()))
    rb = t.new_read_builder()
    return _canonical(rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())


EXPECTED = [
    {"label": "n1", "id": 1, "dt": "a", "qty": 1, "color": None, "price": 1.5, "amount": "1.100"},
    {"label": "two", "id": 2, "dt": "a", "qty": 20, "color": "blue", "price": 20.5, "amount": "20.200"},
    {"label": "n4", "id": 4, "dt": "a", "qty": 4, "color": "red", "price": 4.5, "amount": "4.400"},
    {"label": "n3", "id": 3, "dt": "b", "qty": 3, "color": None, "price": 3.5, "amount": None},
    {"label": "n5", "id": 5, "dt": "b", "qty": 2**40, "color": None, "price": 5.25, "amount": "5.555"},
]


def test_pypaimon_reads_our_evolved_tables(tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    catalog = Catalog(str(tmp_path / "wh"))
    catalog.create_database("db")
    ours = {name: evolve_ours(catalog, name, opts) for name, opts in (
        ("fixed", {"bucket": "2"}), ("dynamic", {"bucket": "-1"}), ("compacted", {"bucket": "1"}))}
    catalog.get_table("db.compacted").compact(full=True)
    for rows in ours.values():
        assert rows == EXPECTED
    names = [f"db.{n}" for n in ours]
    result = pypaimon(PYPAIMON_READ_ALL, warehouse=str(tmp_path / "wh"), tables=names)
    for name in names:
        got = result[name]
        assert got["columns"] == ["label", "id", "dt", "qty", "color", "price", "amount"], name
        assert got["types"][3] == "int64" and got["types"][5] == "double", (name, got["types"])
        assert [{k: (str(v) if k == "amount" and v is not None else v) for k, v in r.items()}
                for r in _canonical(got["rows"])] == [
            {**r, "amount": None if r["amount"] is None else str(Decimal(r["amount"]))} for r in EXPECTED], name


PYPAIMON_EVOLVE = """
from decimal import Decimal
from pypaimon.schema.schema_change import SchemaChange, Move
from pypaimon.schema.data_types import AtomicType
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("db", True)
pa_schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                       pa.field("qty", pa.int32()), pa.field("name", pa.string()), pa.field("gone", pa.string())])
catalog.create_table("db.theirs", Schema.from_pyarrow_schema(pa_schema, primary_keys=["id", "dt"],
                     partition_keys=["dt"], options={"bucket": "2"}), False)

def write(rows):
    t = catalog.get_table("db.theirs")
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.Table.from_pylist(rows, schema=ARROW[len(ARROW) - 1]))
    c.commit(w.prepare_commit())
    w.close(); c.close()

ARROW = [pa_schema]
write([{"id": 1, "dt": "a", "qty": 1, "name": "n1", "gone": "g"}, {"id": 2, "dt": "a", "qty": 2, "name": "n2", "gone": "g"}])
catalog.alter_table("db.theirs", [SchemaChange.add_column("color", AtomicType("STRING")),
                                  SchemaChange.rename_column("name", "label"),
                                  SchemaChange.drop_column("gone"),
                                  SchemaChange.update_column_type("qty", AtomicType("BIGINT"))])
ARROW.append(pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                        pa.field("qty", pa.int64()), pa.field("label", pa.string()), pa.field("color", pa.string())]))
write([{"id": 2, "dt": "a", "qty": 2**40, "label": "two", "color": "red"}, {"id": 3, "dt": "b", "qty": 3, "label": "n3", "color": None}])
emit({"ok": True})
"""


def test_we_read_tables_pypaimon_evolved(tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    wh = str(tmp_path / "wh")
    assert pypaimon(PYPAIMON_EVOLVE, warehouse=wh) == {"ok": True}
    t = Catalog(wh).get_table("db.theirs")
    assert t.schema.field_names == ["id", "dt", "qty", "label", "color"]
    expected = [
        {"id": 1, "dt": "a", "qty": 1, "label": "n1", "color": None},
        {"id": 2, "dt": "a", "qty": 2**40, "label": "two", "color": "red"},
        {"id": 3, "dt": "b", "qty": 3, "label": "n3", "color": None},
    ]

    def ours() -> list[dict[str, Any]]:
        rb = t.new_read_builder()
        return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist(), key=lambda r: r["id"])

    assert ours() == expected
    t.compact(full=True)
    assert ours() == expected
    # And pypaimon reads what our compaction rewrote into the latest schema.
    got = pypaimon(PYPAIMON_READ_ALL, warehouse=wh, tables=["db.theirs"])["db.theirs"]
    assert sorted(got["rows"], key=lambda r: r["id"]) == expected


pytestmark = pytest.mark.interop
