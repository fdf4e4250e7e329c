"""pypaimon code catches pypaimon's exception types, reads their attributes and matches their
messages: our one hierarchy (lakehouse_engine.errors) satisfies those clauses."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import CatalogFactory, Identifier, Schema
from lakehouse_engine.errors import (
    ColumnNotExistException,
    DatabaseAlreadyExistException,
    DatabaseNotExistException,
    LakehouseError,
    TableAlreadyExistException,
    TableNotExistException,
    TagAlreadyExistException,
    TagNotExistError,
    TagNotExistException,
)
from lakehouse_engine.schema_change import SchemaChange

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path):
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("default", False)
    catalog.create_table("default.t", Schema.from_pyarrow_schema(SCHEMA), False)
    table = catalog.get_table("default.t")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pydict({"id": [1], "value": ["a"]}, schema=SCHEMA))
    wb.new_commit().commit(w.prepare_commit())
    return catalog


def test_tag_errors_carry_the_tag_name(catalog) -> None:
    catalog.create_tag("default.t", "t1")
    with pytest.raises(TagAlreadyExistException) as exc:
        catalog.create_tag("default.t", "t1")
    assert exc.value.tag == "t1"
    with pytest.raises(TagNotExistException) as missing:
        catalog.get_tag("default.t", "absent")
    assert missing.value.tag == "absent"
    with pytest.raises(TagNotExistException) as deleted:
        catalog.delete_tag("default.t", "absent")
    assert deleted.value.tag == "absent"


def test_catalog_errors_carry_pypaimons_attributes(catalog) -> None:
    with pytest.raises(DatabaseAlreadyExistException) as db_exists:
        catalog.create_database("default", False)
    assert db_exists.value.database == "default"
    with pytest.raises(DatabaseNotExistException) as no_db:
        catalog.get_database("nope")
    assert no_db.value.database == "nope"
    with pytest.raises(TableNotExistException) as no_table:
        catalog.get_table("default.missing")
    assert no_table.value.identifier == Identifier.create("default", "missing")
    with pytest.raises(TableAlreadyExistException) as table_exists:
        catalog.create_table("default.t", Schema.from_pyarrow_schema(SCHEMA), False)
    assert table_exists.value.identifier.get_full_name() == "default.t"
    with pytest.raises(ColumnNotExistException) as no_column:
        catalog.alter_table("default.t", [SchemaChange.drop_column("nope")])
    assert no_column.value.column == "nope"


def test_missing_tags_and_snapshots_say_doesnt_exist(catalog) -> None:
    table = catalog.get_table("default.t")
    table.create_tag("exists_tag", snapshot_id=1)
    with pytest.raises(ValueError, match="doesn't exist"):
        table.replace_tag("nonexistent", snapshot_id=1)
    with pytest.raises(ValueError, match="doesn't exist"):
        table.replace_tag("exists_tag", snapshot_id=999)


def test_errors_built_as_pypaimon_builds_them() -> None:
    err = TagAlreadyExistException("t1")
    assert (err.tag, str(err)) == ("t1", "Tag t1 already exists")
    err2 = TableNotExistException(Identifier.create("db", "t"))
    assert str(err2) == "Table db.t does not exist" and err2.identifier.get_table_name() == "t"
    assert isinstance(err, LakehouseError) and isinstance(err, ValueError)


def test_named_errors_pickle_with_their_name() -> None:
    err = pickle.loads(pickle.dumps(TagNotExistError("tag 'x' of table db.t doesn't exist", "x")))
    assert (type(err), err.tag, str(err)) == (TagNotExistError, "x", "tag 'x' of table db.t doesn't exist")


def test_dropping_no_partitions_is_a_value_error(tmp_path: Path) -> None:
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("db", False)
    catalog.create_table("db.p", Schema.from_pyarrow_schema(
        pa.schema([("id", pa.int64()), ("dt", pa.string())]), partition_keys=["dt"]), False)
    with pytest.raises(ValueError, match="at least one non-empty partition spec"):
        catalog.drop_partitions("db.p", [])


def test_a_storage_error_is_not_read_as_a_missing_database(catalog) -> None:
    # as Java's FileSystemCatalog asks `fileIO.exists` and pypaimon's test mocks it
    from unittest.mock import MagicMock

    original = catalog.file_io.exists
    catalog.file_io.exists = MagicMock(side_effect=OSError("Permission denied"))
    try:
        with pytest.raises(OSError, match="Permission denied") as exc:
            catalog.get_database("default")
        assert not isinstance(exc.value, DatabaseNotExistException)
    finally:
        catalog.file_io.exists = original
    assert catalog.get_database("default").name == "default"
