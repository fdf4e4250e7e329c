"""pypaimon's constructors and values on our engine: DataField.from_dict and the type classes,
Schema(fields=...), Predicate(method, index, field, literals), tag retention finer than a
millisecond, replace_tag on the latest snapshot, IN / NOT IN with a None literal, and unknown
dotted names in with_projection."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from lakehouse_engine import CatalogFactory, Schema
from lakehouse_engine.data_types import ArrayType, AtomicType, MapType, RowType
from lakehouse_engine.errors import SchemaError, TagNotExistException, UnsupportedError
from lakehouse_engine.format.binary_row import BinaryRowDeserializer
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.schema import DataField

PA_SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path):
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("default", False)
    return catalog


def _table(catalog, name="t", rows=({"id": 1, "value": "a"}, {"id": 2, "value": None})):
    catalog.create_table(f"default.{name}", Schema.from_pyarrow_schema(PA_SCHEMA), True)
    table = catalog.get_table(f"default.{name}")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pylist(list(rows), schema=PA_SCHEMA))
    wb.new_commit().commit(w.prepare_commit())
    return table


def _rows(read_builder):
    return read_builder.new_read().to_arrow(read_builder.new_scan().plan().splits()).to_pylist()


def test_data_field_from_dict_and_schema_of_fields(catalog) -> None:
    fields = [DataField.from_dict({"id": 1, "name": "f0", "type": "INT"}),
              DataField.from_dict({"id": 2, "name": "f1", "type": "VARCHAR(10)", "description": "d"}),
              DataField(3, "f2", AtomicType("DECIMAL(10, 2)", nullable=False))]
    assert fields[1].to_dict() == {"id": 2, "name": "f1", "type": "VARCHAR(10)", "description": "d"}
    catalog.create_table("default.fields", Schema(fields=fields), False)
    table = catalog.get_table("default.fields")
    assert [(f.id, f.name, str(f.type)) for f in table.fields] == \
        [(1, "f0", "INT"), (2, "f1", "VARCHAR(10)"), (3, "f2", "DECIMAL(10, 2) NOT NULL")]
    assert isinstance(table.fields[2].type, AtomicType) and not isinstance(table.fields[2].type, ArrayType)
    assert table.fields[1].description == "d"


def test_nested_type_constructors_build_our_types() -> None:
    array = ArrayType(True, AtomicType("INT"))
    mapping = MapType(False, AtomicType("STRING NOT NULL"), AtomicType("BIGINT"))
    row = RowType(True, [DataField(5, "x", AtomicType("INT"))])
    assert (str(array), str(mapping), str(row)) == \
        ("ARRAY<INT>", "MAP<STRING NOT NULL, BIGINT> NOT NULL", "ROW<x: INT>")
    assert isinstance(array, ArrayType) and isinstance(row, RowType) and not isinstance(row, AtomicType)
    assert ArrayType.from_dict({"type": "ARRAY", "element": "INT"}) == array
    assert AtomicType.from_dict("BIGINT NOT NULL") == AtomicType("BIGINT", nullable=False)


def test_row_type_prints_as_pypaimon_and_keeps_java_form_in_to_string() -> None:
    row = RowType(True, [DataField(0, "a", AtomicType("STRING"), "Someone's desc."),
                         DataField(1, "b", AtomicType("TIMESTAMP(6)"))])
    assert str(row) == "ROW<a: STRING COMMENT Someone's desc., b: TIMESTAMP(6)>"
    assert str(RowType.from_dict(row.to_dict())) == str(row)
    nested = ArrayType(False, RowType(True, [DataField(2, "x", AtomicType("INT", nullable=False))]))
    assert str(nested) == "ARRAY<ROW<x: INT NOT NULL>> NOT NULL"
    # Paimon's (Java's) form, which the CLI shows and error messages use.
    assert row.to_string() == "ROW<`a` STRING, `b` TIMESTAMP(6)>"
    assert nested.to_string() == "ARRAY<ROW<`x` INT NOT NULL>> NOT NULL"


@pytest.mark.parametrize("name", ["BLOB", "VARIANT"])
def test_blob_and_variant_types_are_named_but_no_table_holds_them(catalog, name: str) -> None:
    # pypaimon's test_atomic_type: the type prints as its name; our tables refuse it.
    assert (str(AtomicType(name)), str(AtomicType(name, nullable=False))) == (name, f"{name} NOT NULL")
    for column in (AtomicType(name), ArrayType(True, AtomicType(name))):
        with pytest.raises(UnsupportedError, match=f"Paimon type {name} is not supported"):
            catalog.create_table("default.b", Schema(fields=[DataField(0, "id", AtomicType("INT")),
                                                             DataField(1, "b", column)]), False)
    assert catalog.list_tables("default") == []
    with pytest.raises(UnsupportedError, match=name):
        DataField.from_dict({"id": 0, "name": "b", "type": name})


def test_key_stats_read_as_pypaimon_reads_them(catalog) -> None:
    # pypaimon's test_pk_reader_with_filter: `key_stats.min_values.data` decoded by the key fields.
    schema = pa.schema([pa.field("key1", pa.int32(), nullable=False), pa.field("key2", pa.string(), nullable=False),
                        pa.field("dt", pa.string(), nullable=False), ("v", pa.string())])
    catalog.create_table("default.ks", Schema.from_pyarrow_schema(
        schema, partition_keys=["dt"], primary_keys=["key1", "key2"], options={"bucket": "1"}), False)
    table = catalog.get_table("default.ks")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pydict({"key1": [4, 1, 7], "key2": ["e", "h", "b"], "dt": ["p", "p", "p"],
                                        "v": ["x", "y", "z"]}, schema=schema))
    wb.new_commit().commit(w.prepare_commit())
    (split,) = table.new_read_builder().new_scan().plan().splits()
    stats = split.files[0].key_stats
    assert isinstance(stats.min_values.data, bytes) and stats.min_values.data == stats.min_values
    assert [f.name for f in table.primary_keys_fields] == ["key1", "key2"]
    assert [f.name for f in table.partition_keys_fields] == ["dt"]
    assert table.field_dict["v"].type.type == "STRING"
    low = BinaryRowDeserializer.from_bytes(stats.min_values.data, table.primary_keys_fields)
    high = BinaryRowDeserializer.from_bytes(stats.max_values.data, table.primary_keys_fields)
    # Per field, as Paimon keeps them: the least and greatest of each key column.
    assert (low.to_dict(), high.to_dict()) == ({"key1": 1, "key2": "b"}, {"key1": 7, "key2": "h"})
    assert (low.get_field(0), len(low)) == (1, 2)


def test_predicate_built_as_pypaimon_builds_it() -> None:
    table = pa.table({"val": [None, 1, 3]})
    not_in = Predicate(method="notIn", index=0, field="val", literals=[1, 2])
    assert ds.InMemoryDataset(table).scanner(filter=not_in.to_arrow()).to_table().to_pydict() == {"val": [3]}
    positional = Predicate("in", 0, "val", [1, None])
    assert (positional.index, positional.field, positional.literals) == (0, "val", (1, None))
    assert ds.InMemoryDataset(table).scanner(filter=positional.to_arrow()).to_table().to_pydict() == {"val": [1]}
    both = Predicate(method="or", index=None, field=None, literals=[not_in, positional])
    assert both.children == (not_in, positional)
    assert ds.InMemoryDataset(table).scanner(filter=both.to_arrow()).to_table().to_pydict() == {"val": [1, 3]}


def test_in_and_not_in_with_a_none_literal_follow_sql(catalog) -> None:
    table = _table(catalog)
    pb = table.new_read_builder().new_predicate_builder()
    assert _rows(table.new_read_builder().with_filter(pb.is_in("value", ["a", None]))) == [{"id": 1, "value": "a"}]
    assert _rows(table.new_read_builder().with_filter(pb.is_not_in("value", ["b", None]))) == []
    assert _rows(table.new_read_builder().with_filter(pb.is_not_in("value", ["b"]))) == [{"id": 1, "value": "a"}]
    with pytest.raises(SchemaError) as unknown:
        pb.equal("f2", 1)
    assert str(unknown.value) == "The field f2 is not in field list ['id', 'value']."


def test_tag_retention_in_microseconds_is_kept_and_nanoseconds_refused(catalog) -> None:
    table = _table(catalog)
    catalog.create_tag("default.t", "t1", time_retained="500micro")
    content = json.loads(Path(table.path, "tag", "tag-t1").read_text())
    assert content["tagTimeRetained"] == 0.0005
    assert catalog.get_tag("default.t", "t1").tag_time_retained == "PT0.0005S"
    for retained in ("1ns", "999ns"):
        with pytest.raises(ValueError, match="finer than a microsecond"):
            catalog.create_tag("default.t", "t2", time_retained=retained)
        with pytest.raises(TagNotExistException):
            catalog.get_tag("default.t", "t2")


def test_replace_tag_without_a_snapshot_takes_the_latest(catalog) -> None:
    table = _table(catalog)
    _table(catalog, rows=[{"id": 3, "value": "c"}])
    table.create_tag("latest_test", snapshot_id=1)
    assert table.tag_manager().get("latest_test").trim_to_snapshot().id == 1
    table.replace_tag("latest_test")
    assert table.tag_manager().get("latest_test").trim_to_snapshot().id == 2


def test_unknown_dotted_projection_names_are_skipped_plain_ones_refused(catalog) -> None:
    table = _table(catalog)
    rb = table.new_read_builder().with_projection(["id", "nonexistent.foo"])
    assert _rows(rb) == [{"id": 1}, {"id": 2}]
    assert [f.name for f in rb.read_type()] == ["id"]
    with pytest.raises(SchemaError, match="unknown fields \\['nope'\\]"):
        table.new_read_builder().with_projection(["id", "nope"])


def test_add_column_before_partition_places_new_columns_before_the_partition_fields(catalog) -> None:
    from lakehouse_engine.schema_change import SchemaChange

    fields = [DataField.from_dict({"id": 0, "name": "col1", "type": "STRING"}),
              DataField.from_dict({"id": 1, "name": "partition_col", "type": "STRING"})]
    catalog.create_table("default.acbp", Schema(fields=fields, partition_keys=["partition_col"]), False)
    catalog.alter_table("default.acbp", [SchemaChange.set_option("add-column-before-partition", "true")], False)
    catalog.alter_table("default.acbp", [SchemaChange.add_column("new_col", AtomicType("INT"))], False)
    assert [f.name for f in catalog.get_table("default.acbp").fields] == ["col1", "new_col", "partition_col"]


def test_a_map_types_dict_says_its_nullability_as_pypaimons_does() -> None:
    for map_nullable in (True, False):
        for value_nullable in (True, False):
            original = MapType(map_nullable, AtomicType("STRING", nullable=False),
                               AtomicType("INT", nullable=value_nullable))
            assert original.to_dict()["nullable"] is map_nullable
            assert MapType.from_dict(original.to_dict()) == original
    legacy = MapType(True, AtomicType("STRING", nullable=False), AtomicType("INT")).to_dict()
    legacy.pop("nullable")  # a dict without the key (Paimon's schema files): the type string says it
    assert MapType.from_dict(legacy).nullable
    # schema files stay as Paimon (Java) writes them
    assert "nullable" not in MapType(False, AtomicType("STRING"), AtomicType("INT")).to_json()
