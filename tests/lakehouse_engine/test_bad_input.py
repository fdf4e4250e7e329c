"""Bad input raises a clear LakehouseError subclass and leaves every stored file unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import (
    Catalog,
    CorruptFileError,
    InvalidDataError,
    InvalidIdentifierError,
    InvalidOptionError,
    LakehouseError,
    Schema,
    SchemaError,
    TableNotExistError,
    UnsupportedError,
)
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from tests.lakehouse_engine.conftest import create_table, read, snapshot_files, write

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.date32(), nullable=False),
    pa.field("v", pa.string()),
    pa.field("rk", pa.string()),
])


@pytest.fixture
def table(catalog: Catalog):
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": "2", "rowkind.field": "rk"})
    write(t, pa.table({"id": [1, 2], "dt": pa.array([19000, 19001], pa.date32()), "v": ["a", "b"],
                       "rk": ["+I", "+I"]}, schema=SCHEMA))
    return t


def write_rows(table, data: pa.Table) -> None:
    write(table, data)


BAD_BATCHES: dict[str, tuple[Callable[[], pa.Table], type[LakehouseError], str]] = {
    "missing column": (lambda: pa.table({"id": [3], "dt": pa.array([1], pa.date32()), "v": ["x"]}),
                       SchemaError, "missing columns \\['rk'\\]"),
    "extra column": (lambda: pa.table({"id": [3], "dt": pa.array([1], pa.date32()), "v": ["x"],
                                       "rk": ["+I"], "oops": [1]}), SchemaError, "unexpected columns \\['oops'\\]"),
    "wrong type": (lambda: pa.table({"id": ["three"], "dt": pa.array([1], pa.date32()), "v": ["x"],
                                     "rk": ["+I"]}), SchemaError, "column 'id'"),
    "null primary key": (lambda: pa.table({"id": pa.array([3, None], pa.int64()),
                                           "dt": pa.array([1, 1], pa.date32()), "v": ["x", "y"],
                                           "rk": ["+I", "+I"]}), InvalidDataError, "primary key field 'id'"),
    "null partition key": (lambda: pa.table({"id": [3], "dt": pa.array([None], pa.date32()), "v": ["x"],
                                             "rk": ["+I"]}), InvalidDataError, "'dt'"),
    "unknown row kind": (lambda: pa.table({"id": [3], "dt": pa.array([1], pa.date32()), "v": ["x"],
                                           "rk": ["upsert"]}), InvalidDataError, "unknown row kinds \\['upsert'\\]"),
    "overflowing value": (lambda: pa.table({"id": pa.array([3], pa.decimal128(30, 0)), "dt": pa.array([1], pa.date32()),
                                            "v": ["x"], "rk": ["+I"]}), SchemaError, "column 'id'"),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_bad_batch_is_rejected_and_nothing_changes(table, case: str) -> None:
    make, error, message = BAD_BATCHES[case]
    before = snapshot_files(table)
    with pytest.raises(error, match=message):
        write_rows(table, make())
    assert snapshot_files(table) == before
    assert sorted(read(table).column("id").to_pylist()) == [1, 2]


def test_partition_value_that_cannot_be_a_directory(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False)])
    t = create_table(catalog, "p", schema, primary_keys=["id", "p"], partition_keys=["p"], options={"bucket": "1"})
    write(t, pa.table({"id": [0], "p": ["ok"]}, schema=schema))
    before = snapshot_files(t)
    with pytest.raises(InvalidDataError, match="too long"):
        write(t, pa.table({"id": [1, 2], "p": ["fine", "x" * 300]}, schema=schema))
    assert snapshot_files(t) == before


def test_partition_values_with_path_characters_stay_inside_the_table(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False)])
    t = create_table(catalog, "p", schema, primary_keys=["id", "p"], partition_keys=["p"], options={"bucket": "1"})
    write(t, pa.table({"id": [1, 2], "p": ["../../escape", "a:b=c"]}, schema=schema))
    dirs = sorted(p.name for p in Path(t.path).iterdir() if p.name.startswith("p="))
    assert dirs == ["p=..%2F..%2Fescape", "p=a%3Ab%3Dc"]
    assert sorted(read(t).column("p").to_pylist()) == ["../../escape", "a:b=c"]


@pytest.mark.parametrize("options, message", [
    ({"bucket": "0"}, "option 'bucket' has invalid value '0'"),
    ({"bucket": "-3"}, "option 'bucket'"),
    ({"bucket": "four"}, "option 'bucket' has invalid value 'four'"),
    ({"bucket": "2", "write-buffer-size": "lots"}, "option 'write-buffer-size'"),
    ({"bucket": "2", "merge-engine": "newest"}, "option 'merge-engine'"),
    ({"bucket": "2", "rowkind.field": "nope"}, "option 'rowkind.field' names unknown field 'nope'"),
    ({"bucket": "2", "sequence.field": "nope"}, "option 'sequence.field'"),
    ({"bucket": "2", "bucket-key": "v"}, "option 'bucket-key'"),
    ({"bucket": "2", "snapshot.time-retained": "forever"}, "option 'snapshot.time-retained'"),
    ({"bucket": "2", "file.format": "csv"}, "option 'file.format'"),
    ({"bucket": "2", "num-sorted-run.compaction-trigger": "6", "num-sorted-run.stop-trigger": "3"},
     "num-sorted-run.stop-trigger"),
])
def test_invalid_options_fail_at_create_time_naming_the_option(catalog: Catalog, options: dict[str, str],
                                                               message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        catalog.create_table("db.bad", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id", "dt"],
                                                                  partition_keys=["dt"], options=options))
    assert not catalog.table_exists("db.bad")


@pytest.mark.parametrize("schema_kwargs, message", [
    ({"primary_keys": ["nope"]}, "primary key 'nope' is not a field"),
    ({"primary_keys": ["id"], "partition_keys": ["dt"], "options": {"bucket": "2", "sequence.field": "v"}},
     "'sequence.field' cannot be used when the primary key"),
    ({"partition_keys": ["nope"]}, "partition key 'nope'"),
    ({"options": {"bucket": "2"}}, "needs option 'bucket-key'"),
])
def test_invalid_keys_fail_at_create_time(catalog: Catalog, schema_kwargs: dict, message: str) -> None:
    with pytest.raises(LakehouseError, match=message):
        catalog.create_table("db.bad", Schema.from_pyarrow_schema(SCHEMA, **schema_kwargs))
    assert not catalog.table_exists("db.bad")


@pytest.mark.parametrize("name", ["../x", "db/../x", "db.a/b", "db...", "db..", "db.", ".t",
                                  "db.t$a$b", "db. t", "db.t\x00", "", "db.t\\x"])
def test_table_names_with_paths_are_rejected(catalog: Catalog, name: str, tmp_path) -> None:
    with pytest.raises(InvalidIdentifierError):
        catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA))
    with pytest.raises(InvalidIdentifierError):
        catalog.get_table(name)


def test_branch_and_system_table_names_are_refused_not_created(catalog: Catalog) -> None:
    with pytest.raises(UnsupportedError, match="system table"):
        catalog.create_table("db.t$snapshots", Schema.from_pyarrow_schema(SCHEMA))
    with pytest.raises(InvalidIdentifierError, match="use create_branch for a branch"):
        catalog.create_table("db.t$branch_b", Schema.from_pyarrow_schema(SCHEMA))
    assert catalog.list_tables("db") == []


def test_unknown_table_and_database(catalog: Catalog) -> None:
    with pytest.raises(TableNotExistError, match="table 'db.missing' does not exist"):
        catalog.get_table("db.missing")
    with pytest.raises(LakehouseError, match="database 'nodb' does not exist"):
        catalog.create_table("nodb.t", Schema.from_pyarrow_schema(SCHEMA))


def test_projection_and_filter_on_unknown_fields(table) -> None:
    with pytest.raises(SchemaError, match="unknown fields \\['nope'\\]"):
        table.new_read_builder().with_projection(["nope"])
    with pytest.raises(SchemaError, match="The field nope is not in field list"):
        table.new_read_builder().new_predicate_builder().equal("nope", 1)


def test_corrupt_files_are_named(table) -> None:
    snap = table.latest_snapshot()
    list_path = table.path_factory.manifest_path(snap.delta_manifest_list)
    with open(list_path, "wb") as f:
        f.write(b"garbage")
    clear_manifest_cache()  # a fresh reader, as another process would be
    with pytest.raises(CorruptFileError, match=snap.delta_manifest_list):
        read(table)
    snapshot_path = table.path_factory.snapshot_path(snap.id)
    with open(snapshot_path, "w") as f:
        f.write("{not json")
    with pytest.raises(CorruptFileError, match=f"snapshot-{snap.id}"):
        read(table)


def test_corrupt_data_file_is_named(table) -> None:
    entry = table.store.manifest_io().live_entries(table.latest_snapshot())[0]
    part = table.store.partition_codec().from_binary(entry.partition)
    path = f"{table.path_factory.bucket_dir(part.spec, entry.bucket)}/{entry.file.file_name}"
    with open(path, "r+b") as f:
        f.truncate(20)
    with pytest.raises(CorruptFileError, match=entry.file.file_name):
        read(table)
