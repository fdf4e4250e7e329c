"""ARRAY, MAP and ROW value columns: declared (Paimon's JSON with nested field ids), written, read,
projected (also one field of a ROW), merged by every merge engine, compacted; refused as keys."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError, SchemaError
from tests.lakehouse_engine.conftest import create_table, read, rows, write

ADDRESS = pa.struct([pa.field("city", pa.string()),
                     pa.field("geo", pa.struct([pa.field("lat", pa.float64()), pa.field("lon", pa.float64())]))])
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("address", ADDRESS),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("scores", pa.map_(pa.string(), pa.list_(pa.int32()))),
    pa.field("visits", pa.list_(pa.struct([pa.field("day", pa.date32()), pa.field("n", pa.int32())]))),
    pa.field("n", pa.int32()),
])
FIRST = pa.table({
    "id": [1, 2],
    "address": [{"city": "Oslo", "geo": {"lat": 59.9, "lon": 10.7}}, None],
    "tags": [["a", None], None],
    "scores": [[("x", [1, 2])], None],
    "visits": [[{"day": None, "n": 3}], []],
    "n": [1, None],
}, schema=SCHEMA)
SECOND = pa.table({
    "id": [1, 3],
    "address": [None, {"city": "Bergen", "geo": None}],
    "tags": [["b"], []],
    "scores": [None, [("y", None)]],
    "visits": [None, None],
    "n": [None, 3],
}, schema=SCHEMA)
ROW1_FIRST, ROW2, ROW3 = (FIRST.to_pylist()[0], FIRST.to_pylist()[1], SECOND.to_pylist()[1])
ROW1_SECOND = SECOND.to_pylist()[0]


def _table(catalog: Catalog, **options: Any) -> Any:
    return create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", **options})


def test_schema_file_holds_paimons_nested_json_with_field_ids(catalog: Catalog) -> None:
    table = _table(catalog)
    doc = json.loads(table.file_io.read_bytes(f"{table.path}/schema/schema-0"))
    fields = {f["name"]: f for f in doc["fields"]}
    # Each column takes the next id, then its nested ROW fields, inner types before the field.
    assert fields["address"]["id"] == 1
    assert fields["address"]["type"] == {"type": "ROW", "fields": [
        {"id": 2, "name": "city", "type": "STRING"},
        {"id": 5, "name": "geo", "type": {"type": "ROW", "fields": [
            {"id": 3, "name": "lat", "type": "DOUBLE"}, {"id": 4, "name": "lon", "type": "DOUBLE"}]}}]}
    assert fields["tags"] == {"id": 6, "name": "tags", "type": {"type": "ARRAY", "element": "STRING"}}
    assert fields["scores"]["type"] == {"type": "MAP", "key": "STRING NOT NULL",
                                        "value": {"type": "ARRAY", "element": "INT"}}
    assert fields["visits"]["id"] == 8
    assert fields["n"]["id"] == 11
    assert doc["highestFieldId"] == 11
    assert catalog.get_table("db.t").schema.arrow_schema() == SCHEMA


@pytest.mark.parametrize("fmt", ["parquet", "orc", "avro"])
def test_nested_values_are_written_merged_and_compacted(catalog: Catalog, fmt: str) -> None:
    table = _table(catalog, **{"file.format": fmt})
    write(table, FIRST)
    write(table, SECOND)
    expected = [ROW1_SECOND, ROW2, ROW3]
    assert rows(read(table), "id") == expected
    table.compact(full=True)
    assert rows(read(catalog.get_table("db.t")), "id") == expected


@pytest.mark.parametrize(("options", "row1"), [
    ({"merge-engine": "first-row"}, ROW1_FIRST),
    # partial-update: a null never overwrites; tags and n take the newer non-null values.
    ({"merge-engine": "partial-update"}, {**ROW1_FIRST, "tags": ["b"]}),
    ({"merge-engine": "aggregation"}, {**ROW1_FIRST, "tags": ["b"]}),
    ({"merge-engine": "aggregation", "fields.tags.aggregate-function": "first_value",
      "fields.address.aggregate-function": "last_value"}, {**ROW1_FIRST, "address": None}),
])
def test_every_merge_engine_merges_nested_values(catalog: Catalog, options: dict[str, str],
                                                 row1: dict[str, Any]) -> None:
    table = _table(catalog, **options)
    write(table, FIRST)
    write(table, SECOND)
    assert rows(read(table), "id") == [row1, ROW2, ROW3]


def test_nested_projection_reads_one_field_of_a_row_as_pypaimon_names_it(catalog: Catalog) -> None:
    table = _table(catalog)
    write(table, FIRST)
    out = read(table, projection=["id", "address.city", "address.geo.lat", "tags"])
    assert out.schema == pa.schema([pa.field("id", pa.int64(), nullable=False),
                                    pa.field("address_city", pa.string()),
                                    pa.field("address_geo_lat", pa.float64()),
                                    pa.field("tags", pa.list_(pa.string()))])
    assert rows(out, "id") == [{"id": 1, "address_city": "Oslo", "address_geo_lat": 59.9, "tags": ["a", None]},
                               {"id": 2, "address_city": None, "address_geo_lat": None, "tags": None}]
    # read_type names the fields as the read does.
    builder = table.new_read_builder().with_projection(["id", "address.city", "address.geo.lat", "tags"])
    assert [f.to_arrow() for f in builder.read_type()] == list(out.schema)
    # An unknown path into a ROW column is skipped, as pypaimon skips it.
    skipped = table.new_read_builder().with_projection(["id", "address.zip"])
    assert skipped.new_read().to_arrow(skipped.new_scan().plan().splits()).column_names == ["id"]


def test_nested_projection_is_the_same_through_every_read_path(catalog: Catalog) -> None:
    # Batches, rows and one split read the range-by-range path, reshaped as `to_arrow` is.
    table = _table(catalog)
    write(table, FIRST)
    write(table, SECOND)
    builder = table.new_read_builder().with_projection(["id", "address.geo.lat"])
    splits = builder.new_scan().plan().splits()
    whole = builder.new_read().to_arrow(splits)
    assert rows(whole, "id") == [{"id": 1, "address_geo_lat": None}, {"id": 2, "address_geo_lat": None},
                                 {"id": 3, "address_geo_lat": None}]
    batches = builder.new_read().to_arrow_batch_reader(splits).read_all()
    assert batches.schema == whole.schema and rows(batches, "id") == rows(whole, "id")
    assert [r.to_dict() for r in builder.new_read().to_iterator(splits)] == rows(whole, "id")
    assert builder.new_read().read_split(splits[0]).schema == whole.schema


def test_orc_file_keeps_null_rows_of_a_sliced_row_column(tmp_path: Any) -> None:
    # pyarrow's ORC writer reads a sliced ROW's validity from the slice's start; a range merge
    # hands the writer such slices, so the writer copies them out first.
    from lakehouse_engine.mergetree.data_file_formats import write_orc
    address = pa.array([{"city": "Oslo"}, None, {"city": "Bergen"}], pa.struct([pa.field("city", pa.string())]))
    table = pa.table({"address": pa.chunked_array([address.slice(1, 1), address.slice(2, 1)])})
    with open(tmp_path / "f.orc", "wb") as sink:
        write_orc(sink, table, "zstd")
    assert orc.read_table(str(tmp_path / "f.orc")).to_pylist() == [{"address": None}, {"address": {"city": "Bergen"}}]


@pytest.mark.parametrize(("keys", "options", "role"), [
    ({"primary_keys": ["id", "tags"]}, {}, "primary key"),
    ({"primary_keys": ["id"], "partition_keys": ["address"]}, {}, "partition key"),
    ({"primary_keys": ["id", "scores"]}, {"bucket-key": "scores"}, "primary key"),
    ({"primary_keys": ["id"]}, {"sequence.field": "visits"}, "sequence field"),
])
def test_nested_columns_cannot_be_keys_and_nothing_is_created(catalog: Catalog, keys: dict[str, list[str]],
                                                              options: dict[str, str], role: str) -> None:
    with pytest.raises(SchemaError, match=f"column '.*' has nested type .* cannot be a {role}"):
        create_table(catalog, "bad", SCHEMA, options={"bucket": "1", **options}, **keys)  # type: ignore[arg-type]
    assert catalog.list_tables("db") == []


def test_bucket_key_on_a_nested_column_is_refused(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("tags", pa.list_(pa.string()))])
    with pytest.raises(SchemaError, match="column 'tags' has nested type ARRAY<STRING> and cannot be a bucket key"):
        create_table(catalog, "bad", schema, options={"bucket": "2", "bucket-key": "tags"})


def test_aggregate_function_that_does_not_take_nested_types_is_refused(catalog: Catalog) -> None:
    with pytest.raises(InvalidOptionError, match="'sum' does not take field 'tags' of type ARRAY<STRING>"):
        _table(catalog, **{"merge-engine": "aggregation", "fields.tags.aggregate-function": "sum"})


def test_append_table_holds_nested_columns(catalog: Catalog) -> None:
    table = create_table(catalog, "a", SCHEMA, options={"bucket": "-1"})
    write(table, FIRST)
    assert rows(read(table), "id") == FIRST.to_pylist()


def test_batches_with_other_nested_arrow_shapes_are_cast_or_refused_naming_the_column(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False),
                        pa.field("tags", pa.large_list(pa.field("element", pa.string()))),
                        pa.field("address", pa.struct([pa.field("zip", pa.int16())]))])
    table = create_table(catalog, "c", pa.schema([
        pa.field("id", pa.int64(), nullable=False), pa.field("tags", pa.list_(pa.string())),
        pa.field("address", pa.struct([pa.field("zip", pa.int32())]))]), primary_keys=["id"],
        options={"bucket": "1"})
    write(table, pa.table({"id": [1], "tags": [["a"]], "address": [{"zip": 7}]}, schema=schema))
    assert read(table).to_pylist() == [{"id": 1, "tags": ["a"], "address": {"zip": 7}}]
    bad = pa.table({"id": [2], "tags": [["a"]], "address": [{"city": "x"}]})
    with pytest.raises(SchemaError, match="column 'address' of the batch has type struct<city: string>"):
        write(table, bad)
    with pytest.raises(SchemaError, match="column 'tags' of the batch has type string"):
        write(table, pa.table({"id": [2], "tags": ["a"], "address": [{"zip": 1}]}))


def test_predicates_on_nested_columns_are_null_checks_only(catalog: Catalog) -> None:
    table = _table(catalog)
    write(table, FIRST)
    pb = table.new_read_builder().new_predicate_builder()
    assert [r["id"] for r in read(table, predicate=pb.is_null("tags")).to_pylist()] == [2]
    assert [r["id"] for r in read(table, predicate=pb.is_not_null("address")).to_pylist()] == [1]
    with pytest.raises(SchemaError, match="predicate equal on field 'tags' of nested type"):
        pb.equal("tags", ["a"])
