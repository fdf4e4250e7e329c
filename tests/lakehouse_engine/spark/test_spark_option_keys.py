"""A mistyped option key given to a Spark data source is refused when the DataFrame is loaded (or
the write planned), naming the key and the one it is close to: before, `format("lakehouse")` and
`format("lakehouse-changes")` ignored it, and read every partition (`partition`), the latest
snapshot (`snapshot_id`) or started a stream at the default (`scan.mod`). Keys Spark gives a
source, storage options, Paimon keys in Spark's lowercase and other user keys are accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark.changes import register_changes_source
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, write
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.string())])


@pytest.fixture
def table(catalog: Catalog) -> FileStoreTable:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"], options={"bucket": 1})
    write(t, pa.table({"id": [1, 2], "dt": ["a", "b"], "v": ["x", "y"]}, schema=SCHEMA))
    write(t, pa.table({"id": [1], "dt": ["a"], "v": ["x2"]}, schema=SCHEMA))
    return t


def _load(spark: Any, fmt: str, tmp_path: Path, options: dict[str, str], stream: bool = False) -> Any:
    reader = (spark.readStream if stream else spark.read).format(fmt).option("warehouse", str(tmp_path / "warehouse"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load("db.t")


def _refused(load: Any) -> str:
    with pytest.raises(Exception) as error:  # as Spark reports the source's InvalidOptionError
        load()
    return str(error.value)


@pytest.mark.parametrize(("key", "meant"), [("snapshot_id", "snapshot-id"), ("partition", "partitions"),
                                            ("colums", "columns"), ("Merge_Only", "merge-only"),
                                            ("scan.mod", "scan.mode")])
def test_the_lakehouse_source_refuses_a_near_miss_when_loaded(spark: Any, tmp_path: Path, table: FileStoreTable,
                                                              key: str, meant: str) -> None:
    message = _refused(lambda: _load(spark, "lakehouse", tmp_path, {key: "1"}))
    assert f"format('lakehouse'): unknown option '{key.lower()}': did you mean '{meant}'?" in message


def test_the_lakehouse_source_keeps_its_keys_storage_options_and_user_keys(
        spark: Any, tmp_path: Path, table: FileStoreTable) -> None:
    options = {"Snapshot-Id": "1", "partitions": "dt=a", "s3.endpont": "http://127.0.0.1:1", "owner": "me",
               "read.stream.maxBytesPerTrigger": "10", "mergeSchema": "false"}
    rows = _load(spark, "lakehouse", tmp_path, options).collect()
    assert [tuple(r) for r in rows] == [(1, "a", "x")]


def test_a_lakehouse_write_with_a_near_miss_is_refused_before_it_writes(
        spark: Any, tmp_path: Path, table: FileStoreTable) -> None:
    df = spark.createDataFrame([(3, "c", "z")], "id bigint, dt string, v string")
    writer = df.write.format("lakehouse").mode("append").option("warehouse", str(tmp_path / "warehouse"))
    message = _refused(lambda: writer.option("write.merge_schema", "true").save("db.t"))
    assert "unknown option 'write.merge_schema': did you mean 'write.merge-schema'?" in message
    assert table.snapshot_manager().latest_snapshot_id() == 2


@pytest.mark.parametrize(("key", "meant"), [("start_snapshot", "start-snapshot"), ("end-snapshots", "end-snapshot"),
                                            ("modes", "mode")])
def test_the_changes_source_refuses_a_near_miss_in_a_batch_read(spark: Any, tmp_path: Path, catalog: Catalog,
                                                                key: str, meant: str) -> None:
    put(keyed_table(catalog), (1, "a", "+I"))
    register_changes_source(spark)
    message = _refused(lambda: _load(spark, "lakehouse-changes", tmp_path, {"start-snapshot": "0", key: "1"}))
    assert f"format('lakehouse-changes'): unknown option '{key}': did you mean '{meant}'?" in message


@pytest.mark.parametrize(("key", "meant"), [("scan.mod", "scan.mode"), ("consumer_id", "consumer-id"),
                                            ("consumer.ignore-progres", "consumer.ignore-progress"),
                                            ("scan.snapshot_id", "scan.snapshot-id")])
def test_the_changes_source_refuses_a_near_miss_in_a_stream_before_it_starts(
        spark: Any, tmp_path: Path, catalog: Catalog, key: str, meant: str) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    register_changes_source(spark)
    message = _refused(lambda: _load(spark, "lakehouse-changes", tmp_path, {key: "etl"}, stream=True))
    assert f"unknown option '{key}': did you mean '{meant}'?" in message
    assert t.consumer_manager().consumers() == {}


def test_the_changes_stream_keeps_its_keys_and_user_keys(spark: Any, tmp_path: Path, catalog: Catalog) -> None:
    t = keyed_table(catalog)
    first = put(t, (1, "a", "+I"))
    register_changes_source(spark)
    df = _load(spark, "lakehouse-changes", tmp_path, {"Consumer-Id": "etl", "scan.mode": "latest", "owner": "me"},
               stream=True)
    query = (df.writeStream.format("memory").queryName("option_keys")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert t.consumer_manager().consumers() == {"etl": first + 1}
