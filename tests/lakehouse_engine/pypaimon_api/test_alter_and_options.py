"""pypaimon code alters tables and reads options as pypaimon's tests do: `alter_table` failures
are RuntimeErrors in Paimon's words, `type` never changes, restating what the table has is no
change, `alter-column-null-to-not-null.disabled` = false lets a column become NOT NULL, and
`CoreOptions(Options({...}))` answers `merge_engine()`, `deletion_vectors_enabled()`, `type()`."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import CatalogFactory, Identifier, Schema
from lakehouse_engine.data_types import AtomicType
from lakehouse_engine.errors import InvalidOptionError, SchemaError
from lakehouse_engine.options import CoreOptions, MergeEngine, Options
from lakehouse_engine.schema import DataField
from lakehouse_engine.schema_change import SchemaChange

SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path):
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("test_db", False)
    return catalog


def _write(catalog, identifier: str, rows: dict) -> None:
    table = catalog.get_table(identifier)
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pydict(rows, schema=SCHEMA))
    wb.new_commit().commit(w.prepare_commit())
    w.close()


def _schema_ids(catalog, identifier: str) -> list[str]:
    return sorted(os.listdir(catalog.get_table(identifier).path + "/schema"))


def test_immutable_options_change_only_while_the_table_has_no_snapshot(catalog) -> None:
    catalog.create_table("test_db.empty", Schema.from_pyarrow_schema(SCHEMA), False)
    catalog.alter_table("test_db.empty", [SchemaChange.set_option("merge-engine", "first-row")], False)
    catalog.create_table("test_db.t", Schema.from_pyarrow_schema(SCHEMA), False)
    _write(catalog, "test_db.t", {"id": [1], "name": ["a"]})
    before = _schema_ids(catalog, "test_db.t")
    for change in (SchemaChange.set_option("merge-engine", "deduplicate"),
                   SchemaChange.remove_option("merge-engine"),  # not set: refused all the same
                   SchemaChange.set_option("index-file-in-data-file-dir", "true")):
        with pytest.raises(RuntimeError, match=f"Change '{change.key}' is not supported yet."):
            catalog.alter_table("test_db.t", [change], False)
    # the LATEST file is a hint: the guard still sees the snapshots without it
    os.remove(catalog.get_table("test_db.t").path + "/snapshot/LATEST")
    with pytest.raises(InvalidOptionError, match="Change 'merge-engine' is not supported yet."):
        catalog.alter_table("test_db.t", [SchemaChange.set_option("merge-engine", "first-row")], False)
    assert _schema_ids(catalog, "test_db.t") == before


def test_type_never_changes_and_restating_it_is_no_change(catalog) -> None:
    catalog.create_table("test_db.empty", Schema.from_pyarrow_schema(SCHEMA), False)
    for change in (SchemaChange.set_option("type", "format-table"), SchemaChange.remove_option("type")):
        with pytest.raises(RuntimeError, match="Change 'type' is not supported yet."):
            catalog.alter_table("test_db.empty", [change], False)
    catalog.alter_table("test_db.empty", [SchemaChange.set_option("type", "table")], False)
    table = catalog.get_table("test_db.empty")
    assert "type" not in table.table_schema.options
    assert CoreOptions(Options(table.table_schema.options)).type() == "table"


def test_restating_the_key_fields_is_no_change(catalog) -> None:
    catalog.create_table("test_db.pk", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"], options={"bucket": "1"}), False)
    _write(catalog, "test_db.pk", {"id": [1], "name": ["a"]})
    catalog.alter_table("test_db.pk", [SchemaChange.set_option("primary-key", "id")], False)
    assert "primary-key" not in catalog.get_table("test_db.pk").table_schema.options
    with pytest.raises(RuntimeError, match="Change 'primary-key' is not supported yet."):
        catalog.alter_table("test_db.pk", [SchemaChange.set_option("primary-key", "name")], False)


def test_a_column_becomes_not_null_only_when_the_table_allows_it(catalog) -> None:
    def make(name: str, options: dict) -> str:
        ident = f"test_db.{name}"
        catalog.create_table(ident, Schema(fields=[
            DataField.from_dict({"id": 0, "name": "k", "type": "INT"}),
            DataField.from_dict({"id": 1, "name": "v", "type": "BIGINT"})], options=options), False)
        return ident

    to_not_null = SchemaChange.update_column_type("v", AtomicType("BIGINT", nullable=False))
    guarded = make("guarded", {})
    with pytest.raises(RuntimeError, match="nullable to non nullable") as refused:
        catalog.alter_table(guarded, [to_not_null], False)
    assert isinstance(refused.value, SchemaError)
    assert "'alter-column-null-to-not-null.disabled' = 'false'" in str(refused.value)
    with pytest.raises(SchemaError, match="nullable to non nullable"):
        catalog.alter_table(guarded, [SchemaChange.update_column_nullability("v", False)], False)
    assert catalog.get_table(guarded).fields[1].type.nullable

    allowed = make("allowed", {"alter-column-null-to-not-null.disabled": "false"})
    catalog.alter_table(allowed, [to_not_null], False)
    assert not catalog.get_table(allowed).fields[1].type.nullable


def _write_one_row(catalog, identifier: str, row: dict) -> None:
    table = catalog.get_table(identifier)
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([row], schema=table.table_schema.arrow_schema()))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def test_a_type_change_our_reader_cannot_cast_is_refused_in_pypaimons_words(catalog) -> None:
    # pypaimon's test_update_column_type_rejects_non_executable_cast, on a table without data:
    # TIMESTAMP to DECIMAL has no cast kernel, INT to DECIMAL(10, 2) cannot hold every int.
    catalog.create_table("test_db.ts", Schema(fields=[
        DataField.from_dict({"id": 0, "name": "k", "type": "INT"}),
        DataField.from_dict({"id": 1, "name": "ts", "type": "TIMESTAMP(3)"})]), False)
    for column, target in (("ts", "DECIMAL(10, 0)"), ("k", "DECIMAL(10, 2)")):
        with pytest.raises(RuntimeError, match="no executable cast"):
            catalog.alter_table("test_db.ts", [SchemaChange.update_column_type(column, AtomicType(target))], False)
    catalog.alter_table("test_db.ts", [SchemaChange.update_column_type("k", AtomicType("DECIMAL(12, 2)"))], False)
    assert catalog.get_table("test_db.ts").fields[0].type.type == "DECIMAL(12, 2)"


def test_a_type_change_without_an_exact_cast_is_refused_in_pypaimons_words_once_data_exists(catalog) -> None:
    catalog.create_table("test_db.ts2", Schema(fields=[
        DataField.from_dict({"id": 0, "name": "k", "type": "INT"}),
        DataField.from_dict({"id": 1, "name": "s", "type": "STRING"})]), False)
    _write_one_row(catalog, "test_db.ts2", {"k": 1, "s": "12"})
    # With data, a cast that may fail on a stored value is refused (it would fail every read).
    for column, target in (("s", "BIGINT"), ("k", "SMALLINT")):
        with pytest.raises(RuntimeError, match="no executable cast"):
            catalog.alter_table("test_db.ts2", [SchemaChange.update_column_type(column, AtomicType(target))], False)
    catalog.alter_table("test_db.ts2", [SchemaChange.update_column_type("k", AtomicType("BIGINT"))], False)
    assert catalog.get_table("test_db.ts2").fields[0].type.type == "BIGINT"


def test_a_table_without_data_takes_any_type_change_paimon_casts(catalog) -> None:
    # pypaimon's test_alter_table: STRING to BIGINT on a table with no snapshot, as Java allows.
    catalog.create_table("test_db.empty", Schema(fields=[
        DataField.from_dict({"id": 0, "name": "col1", "type": "STRING"}),
        DataField.from_dict({"id": 1, "name": "col2", "type": "STRING", "description": "field2"})]), False)
    catalog.alter_table("test_db.empty", [SchemaChange.update_column_type("col2", AtomicType("BIGINT"))], False)
    table = catalog.get_table("test_db.empty")
    assert (table.fields[1].type.type, table.fields[1].description) == ("BIGINT", "field2")
    _write_one_row(catalog, "test_db.empty", {"col1": "a", "col2": 7})
    assert catalog.get_table("test_db.empty").new_read_builder().new_read().to_arrow(
        catalog.get_table("test_db.empty").new_read_builder().new_scan().plan().splits()).to_pylist() == [
        {"col1": "a", "col2": 7}]
    # With a snapshot the same change is refused: a stored string that is no number fails reads.
    with pytest.raises(SchemaError, match="no executable cast"):
        catalog.alter_table("test_db.empty", [SchemaChange.update_column_type("col1", AtomicType("BIGINT"))], False)
    # Paimon has no cast from DATE to BOOLEAN: refused even on a table without data.
    catalog.create_table("test_db.empty2", Schema(fields=[
        DataField.from_dict({"id": 0, "name": "d", "type": "DATE"})]), False)
    with pytest.raises(SchemaError, match="cannot be converted to BOOLEAN"):
        catalog.alter_table("test_db.empty2", [SchemaChange.update_column_type("d", AtomicType("BOOLEAN"))], False)


def test_core_options_answer_pypaimons_accessors(catalog) -> None:
    options = CoreOptions(Options({"merge-engine": "first-row", "deletion-vectors.enabled": "true"}))
    assert options.merge_engine() == MergeEngine.FIRST_ROW == "first-row"
    assert options.deletion_vectors_enabled() is True
    assert options.type() == "table"
    defaults = CoreOptions(Options.from_none())
    assert (defaults.merge_engine(), defaults.deletion_vectors_enabled()) == (MergeEngine.DEDUPLICATE, False)
    raw = Options({"bucket": 4})
    raw.set(CoreOptions.BUCKET, 8)
    assert (raw.get(CoreOptions.BUCKET), raw.to_map(), raw.contains(CoreOptions.BUCKET)) == (8, {"bucket": "8"}, True)


def test_a_malformed_object_builds_and_raises_when_its_parts_are_asked_for(catalog) -> None:
    identifier = Identifier("mydb", "orders$schemas$snapshots")  # as Java's and pypaimon's
    with pytest.raises(ValueError, match="one '\\$' separator"):
        identifier.is_system_table()
    with pytest.raises(ValueError):
        catalog.get_table("test_db.orders$schemas$snapshots")


def test_a_raw_convertible_split_knows_its_merged_row_count(catalog) -> None:
    catalog.create_table("test_db.pk", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"], options={"bucket": "1"}), False)
    _write(catalog, "test_db.pk", {"id": [1, 2, 3], "name": ["a", "b", "c"]})
    table = catalog.get_table("test_db.pk")
    [single] = table.new_read_builder().new_scan().plan().splits()
    assert single.raw_convertible and single.merged_row_count() == single.row_count == 3
    _write(catalog, "test_db.pk", {"id": [3], "name": ["z"]})
    [overlapping] = catalog.get_table("test_db.pk").new_read_builder().new_scan().plan().splits()
    assert not overlapping.raw_convertible and overlapping.merged_row_count() is None
