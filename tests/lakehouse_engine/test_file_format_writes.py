"""`file.format` = orc / avro and `file.format.per.level`: data files in the chosen format, named
as Paimon names them, read back; postpone-bucket files in Avro as pypaimon writes them."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("small", pa.int8()),
    pa.field("name", pa.string()),
    pa.field("price", pa.decimal128(10, 2)),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us")),
    pa.field("at_ltz", pa.timestamp("ms", tz="UTC")),
    pa.field("clock", pa.time32("ms")),
    pa.field("blob", pa.binary()),
    pa.field("ok", pa.bool_()),
])
DATA = pa.table({
    "id": [1, 2, 3],
    "small": [-128, None, 127],
    "name": ["a", None, "\u65e5\u672c"],
    "price": [decimal.Decimal("1.25"), None, decimal.Decimal("-99999999.99")],
    "day": [datetime.date(2024, 2, 29), None, datetime.date(1969, 12, 31)],
    "at": [datetime.datetime(2026, 11, 21, 12, 0, 0, 123456), None, datetime.datetime(1960, 1, 1)],
    "at_ltz": pa.array([1_700_000_000_123, None, -1], pa.timestamp("ms", tz="UTC")),
    "clock": pa.array([0, None, 86_399_999], pa.time32("ms")),
    "blob": [b"\x00\x01", None, b""],
    "ok": [True, None, False],
}, schema=SCHEMA)


def _files(table: Any) -> list[str]:
    return sorted(s.path.rsplit("/", 1)[-1] for s in table.file_io.list_status(table.path, recursive=True)
                  if "/bucket-" in s.path and not s.is_dir)


def _path(table: Any, suffix: str) -> str:
    return next(s.path for s in table.file_io.list_status(table.path, recursive=True) if s.path.endswith(suffix))


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_data_files_are_written_in_the_chosen_format_and_read_back(catalog: Catalog, fmt: str) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "file.format": fmt})
    write(table, DATA)
    files = _files(table)
    assert len(files) == 1 and files[0].startswith("data-") and files[0].endswith(f"-0.{fmt}")
    assert rows(read(table), "id") == DATA.to_pylist()


def test_avro_file_schema_is_the_one_paimon_writes(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "file.format": "avro"})
    write(table, DATA)
    path = _path(table, ".avro")
    with table.file_io.open_input(path) as f:
        schema = fastavro.reader(f).writer_schema
    assert schema["name"] == "org.apache.paimon.avro.generated.record"
    by_name = {f["name"]: f["type"] for f in schema["fields"]}
    assert by_name["_KEY_id"] == "long" and by_name["_VALUE_KIND"] == "int"
    assert by_name["small"] == ["null", "int"]
    assert by_name["price"] == ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]
    assert by_name["at"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert by_name["at_ltz"] == ["null", {"type": "long", "logicalType": "local-timestamp-millis"}]
    assert by_name["clock"] == ["null", {"type": "int", "logicalType": "time-millis"}]


def test_orc_file_stores_time_as_int_millis(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "file.format": "orc"})
    write(table, DATA)
    path = _path(table, ".orc")
    with table.file_io.open_input(path) as f:
        assert orc.ORCFile(f).schema.field("clock").type == pa.int32()


def test_format_per_level_writes_level_zero_and_compacted_files_differently(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "file.format.per.level": "0:avro", "file.format": "orc"})
    write(table, DATA)
    write(table, DATA.slice(0, 1))
    assert [f.rsplit(".", 1)[1] for f in _files(table)] == ["avro", "avro"]
    table.compact(full=True)  # merges both into one file of the top level (a single file
    table = catalog.get_table("db.t")  # would only change level, keeping its format, as in Paimon)
    live = [f.file_name for s in table.new_read_builder().new_scan().plan().splits() for f in s.files]
    assert [n.rsplit(".", 1)[1] for n in live] == ["orc"]
    assert rows(read(table), "id") == DATA.to_pylist()


def test_postpone_bucket_files_are_avro_unless_file_format_is_set(catalog: Catalog) -> None:
    table = create_table(catalog, "p", SCHEMA, primary_keys=["id"], options={"bucket": "-2"})
    write(table, DATA)
    assert [f.rsplit(".", 1)[1] for f in _files(table)] == ["avro"]
    table.compact(full=True)
    table = catalog.get_table("db.p")
    live = [f.file_name for s in table.new_read_builder().new_scan().plan().splits() for f in s.files]
    assert [n.rsplit(".", 1)[1] for n in live] == ["parquet"]
    assert rows(read(table), "id") == DATA.to_pylist()
    explicit = create_table(catalog, "q", SCHEMA, primary_keys=["id"],
                            options={"bucket": "-2", "file.format": "parquet"})
    write(explicit, DATA)
    assert [f.rsplit(".", 1)[1] for f in _files(explicit)] == ["parquet"]


@pytest.mark.parametrize(("schema", "options", "message"), [
    (pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("t", pa.timestamp("ns"))]),
     {"file.format": "avro"}, "column 't' .* cannot be stored in avro: Avro holds timestamps of precision 6"),
    (pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("m", pa.map_(pa.int32(), pa.int32()))]),
     {"file.format": "avro"}, "column 'm' .* Avro maps need string keys"),
    (SCHEMA, {"file.format": "avro", "file.compression": "lz4"}, "'lz4' cannot compress avro"),
    (SCHEMA, {"file.format": "orc", "file.compression": "brotli"}, "'brotli' cannot compress orc"),
    (SCHEMA, {"file.format.per.level": "0:csv"}, "'file.format.per.level' has invalid entry '0:csv'"),
    (SCHEMA, {"file.format": "lance"}, "'file.format' has invalid value 'lance'"),
])
def test_a_format_that_cannot_hold_the_table_is_refused_and_nothing_is_created(
        catalog: Catalog, schema: pa.Schema, options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        create_table(catalog, "bad", schema, primary_keys=["id"], options={"bucket": "1", **options})
    assert catalog.list_tables("db") == []


def test_avro_files_of_paimons_java_writer_whose_schema_is_a_nullable_union_are_read(tmp_path: Any) -> None:
    from lakehouse_engine.io_warehouse import warehouse_file_io
    from lakehouse_engine.mergetree.data_file_reader import read_data_file

    record = {"type": "record", "name": "record", "namespace": "org.apache.paimon.avro.generated",
              "fields": [{"name": "id", "type": "long"}, {"name": "tags", "type": ["null", {
                  "type": "array", "items": ["null", "string"]}], "default": None}]}
    path = tmp_path / "data-1-0.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, ["null", record], [{"id": 1, "tags": ["a", None]}, {"id": 2, "tags": None}])
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("tags", pa.list_(pa.string()))])
    file_io, root = warehouse_file_io(str(tmp_path), {})
    table = read_data_file(file_io, f"{root}/data-1-0.avro", ["id", "tags"], schema)
    assert table.to_pylist() == [{"id": 1, "tags": ["a", None]}, {"id": 2, "tags": None}]
