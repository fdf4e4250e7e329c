"""A table in an S3 warehouse: write, read, compaction, expiry, orphans, rollback, rescale, tags."""

from __future__ import annotations

import time
from unittest.mock import patch

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CatalogFactory
from lakehouse_engine.errors import InvalidOptionError, StorageError
from lakehouse_engine.io_object_store import ObjectStoreFileIO, s3_settings
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _rows(ids: range, tag: str) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def test_catalog_factory_opens_s3_warehouse_from_paimon_option_names(s3_warehouse: S3Warehouse) -> None:
    catalog = CatalogFactory.create({"warehouse": s3_warehouse.uri, **s3_warehouse.options})
    assert isinstance(catalog.file_io, ObjectStoreFileIO)
    assert catalog.root == f"{s3_warehouse.bucket}/warehouse"
    assert catalog.list_databases() == ["db"]


def test_write_then_read_back_on_s3(s3_warehouse: S3Warehouse) -> None:
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "2"})
    write(table, _rows(range(0, 100), "a"))
    write(table, _rows(range(50, 150), "b"))
    got = read(table).sort_by("id")
    assert got.num_rows == 150
    assert got.column("v").to_pylist() == [f"a{i}" for i in range(50)] + [f"b{i}" for i in range(50, 150)]
    # Another process's catalog sees the same table through the same options.
    again = Catalog(s3_warehouse.uri, s3_warehouse.options).get_table("db.t")
    assert again.latest_snapshot().id == 2  # type: ignore[union-attr]


def test_compaction_expiry_orphans_rollback_and_tags_on_s3(s3_warehouse: S3Warehouse) -> None:
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"],
                         options={"bucket": "1", "write-only": "true"})
    for k in range(4):
        write(table, _rows(range(k * 10, k * 10 + 20), f"w{k}"))
    before = read(table).sort_by("id")
    at_3 = read(table, 3).sort_by("id")
    table.create_tag("t3", 3)
    assert table.compact(full=True)
    assert read(table).sort_by("id").equals(before)
    files = table.file_io.list_status(f"{table.path}/bucket-0")
    orphan = f"{table.path}/bucket-0/data-orphan-0.parquet"
    table.file_io.write_bytes(orphan, b"left by a crashed writer")
    expired = table.expire_snapshots(retain_max=1, retain_min=1, older_than=int(time.time() * 1000))
    assert expired >= 4
    removed = table.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
    assert not table.file_io.exists(orphan)
    assert removed
    assert read(table).sort_by("id").equals(before)
    assert len(table.file_io.list_status(f"{table.path}/bucket-0")) < len(files) + 1
    table.rollback_to("t3")
    assert read(table).sort_by("id").equals(at_3)
    assert at_3.num_rows == 40 and before.num_rows == 50


def test_rescale_on_s3(s3_warehouse: S3Warehouse) -> None:
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "2"})
    write(table, _rows(range(0, 200), "a"))
    table.rescale(4)
    table = s3_warehouse.catalog().get_table("db.t")
    write(table, _rows(range(100, 300), "b"))
    got = read(table).sort_by("id")
    assert got.num_rows == 300
    assert got.column("v").to_pylist()[99:101] == ["a99", "b100"]


def test_s3_settings_take_options_then_environment() -> None:
    env = {"AWS_ACCESS_KEY_ID": "env-key", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_REGION": "eu-west-1",
           "AWS_ENDPOINT_URL": "http://env:9000"}
    assert s3_settings({}, env) == {"access_key": "env-key", "secret_key": "env-secret",
                                    "region": "eu-west-1", "endpoint": "http://env:9000"}
    got = s3_settings({"fs.s3.endpoint": "http://opt:9000", "s3.access-key": "k", "s3.secret-key": "s",
                       "s3.path.style.access": "true"}, env)
    assert got["endpoint"] == "http://opt:9000" and got["access_key"] == "k" and got["path_style"] == "true"


@pytest.mark.parametrize("options, path_style", [
    ({"s3.endpoint": "http://localhost:9000", "s3.access-key": "access-key", "s3.secret-key": "secret-key",
      "s3.session-token": "session-token", "s3.region": "us-east-1", "s3.path-style-access": "true"}, True),
    ({"fs.s3.endpoint": "http://localhost:9000", "fs.s3.accessKeyId": "access-key",
      "fs.s3.accessKeySecret": "secret-key", "fs.s3.securityToken": "session-token",
      "fs.s3.region": "us-east-1"}, None),
])
def test_catalog_opens_s3_with_the_arguments_pypaimon_passes(options: dict[str, str], path_style: bool | None) -> None:
    # pypaimon's shape: the catalog builds pyarrow's S3FileSystem at once, from Paimon's option
    # names or pypaimon's legacy `fs.s3.accessKeyId` ones, the endpoint passed as given.
    with patch("pyarrow.fs.S3FileSystem") as s3_file_system:
        CatalogFactory.create({"warehouse": "s3://bucket/warehouse", **options})
    s3_file_system.assert_called_once()
    kwargs = s3_file_system.call_args[1]
    assert (kwargs["endpoint_override"], kwargs["access_key"], kwargs["secret_key"], kwargs["session_token"],
            kwargs["region"]) == ("http://localhost:9000", "access-key", "secret-key", "session-token", "us-east-1")
    assert kwargs.get("force_virtual_addressing") == (None if path_style is None else not path_style)


def test_legacy_option_names_and_a_full_endpoint_url_reach_the_store(s3_warehouse: S3Warehouse) -> None:
    given = s3_warehouse.options
    legacy = {"fs.s3.endpoint": given["s3.endpoint"], "fs.s3.accessKeyId": given["s3.access-key"],
              "fs.s3.accessKeySecret": given["s3.secret-key"], "fs.s3.region": "us-east-1",
              "fs.s3.path.style.access": "true"}
    assert legacy["fs.s3.endpoint"].startswith("http://")
    table = create_table(Catalog(s3_warehouse.uri, legacy), "t", SCHEMA, ["id"], options={"bucket": "1"})
    write(table, _rows(range(3), "a"))
    again = CatalogFactory.create({"warehouse": s3_warehouse.uri, **legacy}).get_table("db.t")
    assert read(again).sort_by("id").column("v").to_pylist() == ["a0", "a1", "a2"]


def test_access_key_without_secret_key_is_refused_naming_both_options() -> None:
    with pytest.raises(InvalidOptionError, match=r"s3\.access-key is set but s3\.secret-key"):
        Catalog("s3://bucket/wh", {"s3.access-key": "k"})


def test_missing_bucket_is_a_storage_error_naming_the_path(s3_warehouse: S3Warehouse) -> None:
    create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    bad = Catalog(f"s3://no-such-bucket-{s3_warehouse.bucket}/warehouse", s3_warehouse.options)
    with pytest.raises(StorageError, match="no-such-bucket"):
        bad.create_database("db")


def test_cli_reads_an_s3_warehouse_with_option_flags(s3_warehouse: S3Warehouse, capsys: pytest.CaptureFixture[str]) -> None:
    from lakehouse_engine.cli import main

    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    write(table, _rows(range(0, 5), "a"))
    flags = [f"--option={k}={v}" for k, v in s3_warehouse.options.items()]
    assert main([*flags, "--json", "tables", s3_warehouse.uri]) == 0
    assert "t" in capsys.readouterr().out
    assert main(["--option", "s3.endpoint", "tables", s3_warehouse.uri]) != 0
    assert "KEY=VALUE" in capsys.readouterr().err


def test_an_input_changelog_sharing_its_runs_files_reads_on_s3(s3_warehouse: S3Warehouse) -> None:
    # A flush that merged nothing names its run's files again as changelog files: on S3 a
    # server-side copy (no hard links), read back as the commit's changes.
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"],
                         options={"bucket": "2", "changelog-producer": "input"})
    write(table, _rows(range(0, 40), "a"))
    changes = table.changes(0)
    assert sorted(changes.column("id").to_pylist()) == list(range(40))
    assert set(changes.column("_row_kind").to_pylist()) == {"+I"}
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.changelog_record_count == 40
