"""Apache Paimon 0.9 (Java) reads tables we evolved (added, renamed, dropped, widened and moved
columns, files of five schema versions, before and after our compaction) as we read them, and
time-travels to a snapshot of an older schema as we do."""

from __future__ import annotations

from pathlib import Path

from lakehouse_engine import Catalog
from tests.interop.test_schema_evolution_interop import evolve_ours
from tests.java.conftest import Judge, canonical_rows, ok, sorted_values
from tests.lakehouse_engine.conftest import read


def test_java_paimon_reads_our_evolved_tables(tmp_path: Path, judge: Judge) -> None:
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    for name, options in (("fixed", {"bucket": "2"}), ("dynamic", {"bucket": "-1"}), ("compacted", {"bucket": "1"})):
        evolve_ours(catalog, name, options)
    catalog.get_table("db.compacted").compact(full=True)
    requests = [{"op": "read", "warehouse": wh, "table": f"db.{n}"} for n in ("fixed", "dynamic", "compacted")]
    requests.append({"op": "read", "warehouse": wh, "table": "db.fixed", "options": {"scan.snapshot-id": "2"}})
    answers = judge(requests)
    for name, answer in zip(("fixed", "dynamic", "compacted"), answers, strict=False):
        ours = read(catalog.get_table(f"db.{name}"))
        assert sorted_values(ok(answer)["rows"]) == sorted_values(canonical_rows(ours)), name
    old = read(catalog.get_table("db.fixed"), snapshot_id=2)
    assert old.column_names == ["id", "dt", "qty", "color", "price", "amount", "name", "gone"]
    assert sorted_values(ok(answers[3])["rows"]) == sorted_values(canonical_rows(old))


def test_we_read_tables_java_paimon_evolved(tmp_path: Path, judge: Judge) -> None:
    """Paimon 0.9's SchemaManager alters a table between its own writes; we read every version."""
    import pyarrow as pa

    from lakehouse_engine import Schema

    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    catalog.create_table("db.theirs", Schema.from_pyarrow_schema(pa.schema([
        pa.field("id", pa.int64(), nullable=False), pa.field("qty", pa.int32()), pa.field("name", pa.string()),
        pa.field("gone", pa.string())]), primary_keys=["id"], options={"bucket": "2"}))
    table = {"warehouse": wh, "table": "db.theirs"}
    answers = judge([
        {**table, "op": "write", "rows": [["+I", 1, 1, "n1", "g"], ["+I", 2, 2, "n2", "g"]]},
        {**table, "op": "alter", "changes": [
            {"kind": "add", "name": "color", "type": "STRING"},
            {"kind": "rename", "name": "name", "new_name": "label"},
            {"kind": "drop", "name": "gone"},
            {"kind": "type", "name": "qty", "type": "BIGINT"}]},
        {**table, "op": "write", "rows": [["+I", 2, 2**40, "two", "red"], ["+I", 3, 3, "n3", None]]},
        {**table, "op": "read"},
    ])
    for a in answers:
        ok(a)
    t = catalog.get_table("db.theirs")
    assert t.schema.id == 1 and t.schema.field_names == ["id", "qty", "label", "color"]
    expected = [[1, 1, "n1", None], [2, 2**40, "two", "red"], [3, 3, "n3", None]]
    assert sorted_values(canonical_rows(read(t))) == expected
    assert sorted_values(answers[3]["rows"]) == expected
    t.compact(full=True)
    assert sorted_values(canonical_rows(read(catalog.get_table("db.theirs")))) == expected
    assert sorted_values(canonical_rows(read(t, snapshot_id=1))) == [[1, 1, "n1", "g"], [2, 2, "n2", "g"]]
