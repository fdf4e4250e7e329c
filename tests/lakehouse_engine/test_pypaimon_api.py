"""pypaimon 2.1.0's public batch API on our engine: each test is written in pypaimon's shapes
(names, arguments, return values, error types) and checks the outcome, not just that a call exists."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import CatalogFactory, Identifier, Schema
from lakehouse_engine.catalog import Catalog
from lakehouse_engine.errors import (
    DatabaseNotExistException,
    InvalidIdentifierError,
    InvalidOptionError,
    SchemaError,
    TableAlreadyExistException,
    TableNotExistException,
    UnsupportedError,
)
from lakehouse_engine.maintenance.tags import TagAlreadyExistException, TagNotExistException
from lakehouse_engine.options import CoreOptions
from lakehouse_engine.store.snapshot_manager import SnapshotManager
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import snapshot_files

PA_SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("name", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "wh")})
    catalog.create_database("default", True)
    return catalog


def _table(cat: Catalog, name: str = "t", partitioned: bool = True, pk: bool = True,
           options: dict[str, str] | None = None) -> FileStoreTable:
    opts = {CoreOptions.BUCKET.key(): "1"} if pk else {}
    opts.update(options or {})
    schema = Schema.from_pyarrow_schema(PA_SCHEMA, partition_keys=["dt"] if partitioned else None,
                                        primary_keys=(["dt", "id"] if partitioned else ["id"]) if pk else None,
                                        options=opts)
    cat.create_table(Identifier.create("default", name), schema, False)
    return cat.get_table(Identifier.from_string(f"default.{name}"))


def _write(table: FileStoreTable, rows: list[tuple[str, int, str]], overwrite: dict[str, Any] | None = None,
           plain_overwrite: bool = False) -> None:
    wb = table.new_batch_write_builder()
    if overwrite is not None or plain_overwrite:
        wb.overwrite(overwrite)
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.Table.from_pylist([dict(zip(PA_SCHEMA.names, r, strict=True)) for r in rows],
                                           schema=PA_SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _read(table: FileStoreTable, predicate: Any = None) -> list[tuple[Any, ...]]:
    rb = table.new_read_builder()
    if predicate is not None:
        rb = rb.with_filter(predicate)
    out = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted(tuple(r.values()) for r in out.to_pylist())


# ---- identifiers, databases, errors -----------------------------------------------------------
def test_identifier_create_and_from_string() -> None:
    ident = Identifier.create("db", "orders")
    assert ident == Identifier.from_string("db.orders") == Identifier.from_string("`db`.`orders`")
    assert (ident.get_database_name(), ident.get_table_name(), ident.get_object_name()) == ("db", "orders", "orders")
    assert ident.get_full_name() == "db.orders" and ident.object == "orders"
    with pytest.raises(ValueError, match="database.table"):
        Identifier.from_string("orders")
    with pytest.raises(InvalidIdentifierError):  # stricter than pypaimon: a name is never a path
        Identifier.from_string("db.a/b")


def test_get_database_and_error_classes_catchable_as_pypaimons(cat: Catalog) -> None:
    assert cat.get_database("default").name == "default"
    with pytest.raises(DatabaseNotExistException):
        cat.get_database("nope")
    _table(cat)
    with pytest.raises(TableAlreadyExistException):
        _table(cat)
    with pytest.raises(TableNotExistException):
        cat.get_table("default.missing")
    with pytest.raises(ValueError):  # pypaimon raises ValueError for a missing snapshot
        cat.get_table("default.t").snapshot(42)


# ---- options ------------------------------------------------------------------------------------
def test_core_options_constants_have_keys_and_defaults(cat: Catalog) -> None:
    assert CoreOptions.BUCKET.key() == "bucket" and CoreOptions.BUCKET.default_value() == -1
    assert CoreOptions.DYNAMIC_PARTITION_OVERWRITE.key() == "dynamic-partition-overwrite"
    table = _table(cat, options={CoreOptions.FILE_FORMAT.key(): "parquet",
                                 CoreOptions.PRIMARY_KEY_NULLABLE.key(): "false"})
    assert table.options.get(CoreOptions.BUCKET) == 1
    assert table.table_schema.options["primary-key.nullable"] == "false"
    with pytest.raises(InvalidOptionError, match="primary-key.nullable"):
        _table(cat, "nullable_keys", options={"primary-key.nullable": "true"})


# ---- table attributes -----------------------------------------------------------------------------
def test_table_schema_identifier_and_read_type(cat: Catalog) -> None:
    table = _table(cat)
    assert table.schema() is table.table_schema is table.schema
    assert table.identifier == Identifier.create("default", "t")
    assert (table.primary_keys, table.partition_keys, table.field_names) == (["dt", "id"], ["dt"], PA_SCHEMA.names)
    rb = table.new_read_builder().with_projection(["name", "id"])
    assert [f.name for f in rb.read_type()] == ["name", "id"]


# ---- snapshots ----------------------------------------------------------------------------------
def test_snapshot_manager_of_a_table_and_plan_snapshot_id(cat: Catalog) -> None:
    table = _table(cat)
    sm = SnapshotManager(table)
    assert sm.get_latest_snapshot() is None and sm.try_get_earliest_snapshot() is None
    _write(table, [("a", 1, "x")])
    _write(table, [("a", 2, "y")])
    assert sm.get_latest_snapshot().id == 2
    assert sm.get_snapshot_by_id(1).id == 1 and sm.get_snapshot_by_id(9) is None
    assert sm.try_get_earliest_snapshot().id == 1
    assert table.new_read_builder().new_scan().plan().snapshot_id == 2


def test_rollback_to_timestamp(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x")])
    first = table.snapshot(1).time_millis
    time.sleep(0.005)
    _write(table, [("a", 2, "y")])
    assert table.rollback_to_timestamp(first) == 1
    assert _read(table) == [("a", 1, "x")]
    with pytest.raises(ValueError, match="no retained snapshot"):
        table.rollback_to_timestamp(first - 10_000)


# ---- tags ---------------------------------------------------------------------------------------
def test_table_tag_calls(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x")])
    _write(table, [("a", 2, "y")])
    table.create_tag("v1", 1)
    table.create_tag("v1", 2, ignore_if_exists=True)  # left as it is
    with pytest.raises(ValueError, match="already exists"):
        table.create_tag("v1", 2)
    assert table.tag_manager().get("v1").id == 1
    table.rename_tag("v1", "first")
    assert table.list_tags() == ["first"]
    table.replace_tag("first", 2)
    assert table.tag_manager().get_or_throw("first").id == 2
    assert table.delete_tag("first") is True and table.delete_tag("first") is False
    with pytest.raises(ValueError, match="doesn't exist"):
        table.rename_tag("first", "again")


def test_tag_with_time_retained_is_read_by_get_tag(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x")])
    before = int(time.time() * 1000) - 1000
    cat.create_tag("default.t", "kept", time_retained="1 d")
    response = cat.get_tag("default.t", "kept")
    assert response.tag_name == "kept" and response.snapshot.id == 1
    assert response.tag_time_retained == "PT24H"
    assert response.tag_create_time is not None and response.tag_create_time >= before
    assert "tagCreateTime" not in response.snapshot.extra  # the snapshot without tag-only fields
    assert _read(table.copy({"scan.tag-name": "kept"})) == [("a", 1, "x")]


def test_catalog_tag_calls(cat: Catalog) -> None:
    _write(_table(cat), [("a", 1, "x")])
    for name in ("b1", "a1", "a2"):
        cat.create_tag("default.t", name)
    with pytest.raises(TagAlreadyExistException):
        cat.create_tag("default.t", "a1")
    cat.create_tag("default.t", "a1", ignore_if_exists=True)
    page = cat.list_tags_paged("default.t", max_results=2)
    assert page.elements == ["a1", "a2"] and page.next_page_token == "a2"
    assert cat.list_tags_paged("default.t", page_token=page.next_page_token).elements == ["b1"]
    assert cat.list_tags_paged("default.t", tag_name_prefix="a").elements == ["a1", "a2"]
    cat.replace_tag("default.t", "a1", 1)
    cat.rename_tag("default.t", "a2", "c1")
    cat.delete_tag("default.t", "b1")
    with pytest.raises(TagNotExistException):
        cat.delete_tag("default.t", "b1")
    with pytest.raises(TagNotExistException):
        cat.get_tag("default.t", "b1")
    assert cat.get_table("default.t").list_tags() == ["a1", "c1"]


# ---- predicates ---------------------------------------------------------------------------------
def test_predicates_contains_endswith_like_not_between_and_is_in_null(cat: Catalog) -> None:
    table = _table(cat, partitioned=False, pk=False)
    _write(table, [("a", 1, "apple"), ("a", 2, "banana"), ("a", 3, None), ("a", 4, "cherry")])
    pb = table.new_read_builder().new_predicate_builder()

    def ids(predicate: Any) -> list[int]:
        return [r[1] for r in _read(table, predicate)]

    assert ids(pb.contains("name", "an")) == [2]
    assert ids(pb.endswith("name", "ry")) == [4]
    assert ids(pb.like("name", "_pp%")) == [1]
    assert ids(pb.not_between("id", 2, 3)) == [1, 4]
    assert ids(pb.is_in("name", [None])) == []
    assert ids(pb.is_in("name", ["apple", None])) == [1]


# ---- reads ----------------------------------------------------------------------------------------
def test_to_arrow_parallelism_to_pandas_to_iterator_and_split_partition(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x"), ("b", 2, "y")])
    rb = table.new_read_builder()
    splits = rb.new_scan().plan().splits()
    read = rb.new_read()
    serial, parallel = read.to_arrow(splits, parallelism=1), read.to_arrow(splits, parallelism=4)
    assert serial.sort_by("id").equals(parallel.sort_by("id"))
    assert sorted(read.to_pandas(splits, parallelism=2)["id"]) == [1, 2]
    rows = sorted((r.get_field(1), r.to_dict()["dt"]) for r in read.to_iterator(splits))
    assert rows == [(1, "a"), (2, "b")]
    assert sorted(s.partition.to_dict()["dt"] for s in splits) == ["a", "b"]
    assert {bytes(s.partition) for s in splits} == {bytes(s.partition) for s in splits}  # still BinaryRow bytes
    with pytest.raises(InvalidOptionError, match="parallelism"):
        read.to_arrow(splits, parallelism=0)


def test_to_duckdb_when_duckdb_is_installed(cat: Catalog) -> None:
    duckdb = pytest.importorskip("duckdb")
    table = _table(cat)
    _write(table, [("a", 1, "x")])
    rb = table.new_read_builder()
    con = rb.new_read().to_duckdb(rb.new_scan().plan().splits(), "t", connection=duckdb.connect())
    assert con.execute("select count(*) from t").fetchone() == (1,)


# ---- writes -------------------------------------------------------------------------------------
def test_with_write_type_writes_the_other_columns_as_null_and_abort_deletes_files(cat: Catalog) -> None:
    table = _table(cat, options={"merge-engine": "partial-update"})
    _write(table, [("a", 1, "x")])
    wb = table.new_batch_write_builder()
    write = wb.new_write().with_write_type(["dt", "id"])
    write.write_arrow(pa.table({"dt": ["a", "a"], "id": [1, 2]}))
    wb.new_commit().commit(write.prepare_commit())
    assert _read(table) == [("a", 1, "x"), ("a", 2, None)]  # partial update keeps 'x'
    with pytest.raises(SchemaError, match="must be written"):
        table.new_batch_write_builder().new_write().with_write_type(["name"])
    before = snapshot_files(table)
    write = table.new_batch_write_builder().new_write()
    write.write_arrow(pa.Table.from_pylist([{"dt": "b", "id": 9, "name": "z"}], schema=PA_SCHEMA))
    write._flush_all(list(write._writers.values()))  # files on disk, not yet in any message
    assert snapshot_files(table) != before
    write.abort()
    assert snapshot_files(table) == before


def test_postpone_fixed_bucket_write_builder(cat: Catalog) -> None:
    table = _table(cat, options={"bucket": "-2"})
    wb = table.new_postpone_fixed_bucket_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"dt": "a", "id": 1, "name": "x"}], schema=PA_SCHEMA))
    commit.commit(write.prepare_commit())
    table.compact()
    assert _read(table) == [("a", 1, "x")]
    with pytest.raises(SchemaError, match="postpone"):
        _table(cat, "fixed").new_postpone_fixed_bucket_write_builder()


# ---- overwrite: dynamic-partition-overwrite -------------------------------------------------------
def test_overwrite_without_partition_replaces_only_the_partitions_in_the_data(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x"), ("b", 2, "y")])
    _write(table, [("a", 3, "z")], plain_overwrite=True)
    assert _read(table) == [("a", 3, "z"), ("b", 2, "y")]
    _write(table, [], plain_overwrite=True)  # no data: nothing replaced, no snapshot
    assert table.latest_snapshot().id == 2


def test_overwrite_with_dynamic_partition_overwrite_off_replaces_the_table(cat: Catalog) -> None:
    table = _table(cat, options={"dynamic-partition-overwrite": "false"})
    _write(table, [("a", 1, "x"), ("b", 2, "y")])
    _write(table, [("a", 3, "z")], plain_overwrite=True)
    assert _read(table) == [("a", 3, "z")]


def test_static_overwrite_still_replaces_the_named_partition(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x"), ("b", 2, "y")])
    _write(table, [], overwrite={"dt": "b"})
    assert _read(table) == [("a", 1, "x")]


def test_overwrite_of_an_unpartitioned_table_replaces_it(cat: Catalog) -> None:
    table = _table(cat, partitioned=False)
    _write(table, [("a", 1, "x"), ("b", 2, "y")])
    _write(table, [("c", 3, "z")], plain_overwrite=True)
    assert _read(table) == [("c", 3, "z")]


# ---- table management -----------------------------------------------------------------------------
def test_list_partitions_with_statistics_and_pages(cat: Catalog) -> None:
    table = _table(cat)
    assert cat.list_partitions("default.t") == []
    _write(table, [("a", 1, "x"), ("a", 2, "y"), ("b", 3, "z")])
    _write(table, [("b", 4, "w")])
    parts = cat.list_partitions("default.t")
    assert [(p.spec, p.record_count, p.file_count, p.total_buckets) for p in parts] == [
        ({"dt": "a"}, 2, 1, 1), ({"dt": "b"}, 2, 2, 1)]
    assert all(p.file_size_in_bytes > 0 and p.last_file_creation_time > 0 for p in parts)
    page = cat.list_partitions_paged("default.t", max_results=1)
    assert [p.spec for p in page.elements] == [{"dt": "a"}] and page.next_page_token == "dt=a"
    assert [p.spec for p in cat.list_partitions_paged("default.t", page_token="dt=a").elements] == [{"dt": "b"}]
    assert [p.spec for p in cat.list_partitions_paged("default.t", partition_name_pattern="dt=b*").elements] == [
        {"dt": "b"}]


def test_drop_partitions_and_truncate_table(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x"), ("b", 2, "y"), ("c", 3, "z")])
    cat.drop_partitions("default.t", [{"dt": "a"}, {"dt": "c"}])
    assert _read(table) == [("b", 2, "y")]
    assert _read(table.copy({"scan.snapshot-id": "1"})) == [("a", 1, "x"), ("b", 2, "y"), ("c", 3, "z")]
    before = snapshot_files(table)
    for bad in ([], [{"nope": "a"}]):
        with pytest.raises(Exception, match="partition"):
            cat.drop_partitions("default.t", bad)
    assert snapshot_files(table) == before
    cat.truncate_table("default.t")
    assert _read(table) == [] and table.latest_snapshot().commit_kind == "OVERWRITE"


def test_rename_table(cat: Catalog) -> None:
    _write(_table(cat), [("a", 1, "x")])
    cat.create_database("other", True)
    cat.rename_table("default.t", Identifier.create("other", "t2"))
    assert not cat.table_exists("default.t")
    assert _read(cat.get_table("other.t2")) == [("a", 1, "x")]
    _table(cat, "u")
    with pytest.raises(TableAlreadyExistException):
        cat.rename_table("default.u", "other.t2")
    with pytest.raises(TableNotExistException):
        cat.rename_table("default.t", "other.t3")
    with pytest.raises(DatabaseNotExistException):
        cat.rename_table("default.u", "nodb.u")
    assert cat.table_exists("default.u")


def test_rename_table_refuses_object_storage(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    _table(cat)
    monkeypatch.setattr(cat.file_io, "is_local", False)
    with pytest.raises(UnsupportedError, match="atomically"):
        cat.rename_table("default.t", "default.t2")
    assert cat.table_exists("default.t")


def test_commit_truncate_partitions_and_truncate_table(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x"), ("b", 2, "y")])
    commit = table.new_batch_write_builder().new_commit()
    commit.truncate_partitions([{"dt": "a"}])
    commit.close()
    assert _read(table) == [("b", 2, "y")]
    with pytest.raises(Exception, match="partition"):
        table.new_batch_write_builder().new_commit().truncate_partitions([{"name": "x"}])
    table.new_batch_write_builder().new_commit().truncate_table()
    assert _read(table) == [] and [s.commit_kind for s in table.snapshots()] == ["APPEND", "OVERWRITE", "OVERWRITE"]


def test_a_bad_time_retained_changes_nothing(cat: Catalog) -> None:
    table = _table(cat)
    _write(table, [("a", 1, "x")])
    table.create_tag("v1")
    before = snapshot_files(table)
    for call in (lambda: table.create_tag("v2", time_retained="soon"),
                 lambda: table.create_tag("v1", ignore_if_exists=True, time_retained="soon"),
                 lambda: table.replace_tag("v1", 1, time_retained="soon")):
        with pytest.raises(InvalidOptionError, match="time_retained 'soon'"):
            call()
    assert snapshot_files(table) == before
