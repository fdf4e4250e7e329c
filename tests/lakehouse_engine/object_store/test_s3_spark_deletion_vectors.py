"""Spark's read of a deletion-vector table on S3: `lakehouse_engine.spark.read` (on an object store
the `lakehouse` data source, whose executors apply the vectors with the engine: pyspark ships no
`hadoop-aws`), the data source itself and SQL over it read exactly the engine's live rows; a
damaged vector fails naming `CorruptFileError` and the index file; `native=True` without an S3
filesystem in Spark's Hadoop configuration fails naming the missing filesystem."""

from __future__ import annotations

from typing import Any

import boto3
import pyarrow as pa
import pytest

from lakehouse_engine.errors import InvalidArgumentError
from lakehouse_engine.spark import read
from lakehouse_engine.spark.datasource import register_data_source
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, write
from tests.lakehouse_engine.conftest import read as engine_read
from tests.lakehouse_engine.object_store.conftest import ACCESS_KEY, REGION, SECRET_KEY, S3Warehouse
from tests.lakehouse_engine.spark.conftest import spark, spark_session  # noqa: F401

pytestmark = pytest.mark.spark

_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                     pa.field("v", pa.string()), pa.field("kind", pa.string())])


def _batch(ids: range, tag: str, kind: str = "+I") -> pa.Table:
    return pa.table({"id": list(ids), "dt": [f"d{i % 3}" for i in ids], "v": [f"{tag}{i}" for i in ids],
                     "kind": [kind] * len(ids)}, schema=_SCHEMA)


def _dv_table(spark: Any, warehouse: S3Warehouse) -> FileStoreTable:  # noqa: F811
    """Ours on S3: partitions, two buckets, small files; written, upserted, deleted from. The data
    source's Python workers get the credentials as a session started with `credentials_conf`
    gives them (the environment the data source is registered with)."""
    spark.sparkContext.environment.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY,
                                           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION})
    register_data_source(spark)
    table = create_table(warehouse.catalog(), "dv", _SCHEMA, ["id", "dt"], partition_keys=["dt"], options={
        "bucket": "2", "deletion-vectors.enabled": "true", "rowkind.field": "kind", "target-file-size": "4kb"})
    write(table, _batch(range(0, 600), "a"))
    write(table, _batch(range(100, 300), "b"))
    write(table, _batch(range(250, 800, 3), "c"))
    write(table, _batch(range(0, 600, 7), "x", "-D"))
    marked = [d for s in table.new_read_builder().new_scan().plan().splits()
              for d in s.data_deletion_files or [] if d is not None]
    assert len(marked) > 2, "vectors on several files"
    return table


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _expected(table: FileStoreTable) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in engine_read(table).to_pylist())


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_a_dv_table_on_s3_reads_through_spark_exactly_as_the_engine_reads_it(
        spark: Any, s3_warehouse: S3Warehouse) -> None:  # noqa: F811
    table = _dv_table(spark, s3_warehouse)
    expected = _expected(table)
    assert len(expected) == 600 + len(range(601, 800, 3)) - len(range(0, 600, 7))
    df = read(spark, table)  # an object store: the data source, the vectors applied on executors
    assert "BatchScan lakehouse" in _plan(df)
    assert _rows(df) == expected
    # A projection and a partition.
    assert _rows(read(spark, table, columns=["v", "id"], partitions="dt=d1")) == sorted(
        (r[2], r[0]) for r in expected if r[1] == "d1")
    # The data source as a user loads it, and SQL over it.
    source = (spark.read.format("lakehouse").option("warehouse", s3_warehouse.uri)
              .options(**s3_warehouse.options).load("db.dv"))
    assert _rows(source) == expected
    source.createOrReplaceTempView("s3_dv")
    got = spark.sql("SELECT id, v FROM s3_dv WHERE dt = 'd2' AND id >= 250").collect()
    assert sorted(tuple(r) for r in got) == sorted((r[0], r[2]) for r in expected if r[1] == "d2" and r[0] >= 250)
    assert spark.sql("SELECT count(*) FROM s3_dv").collect()[0][0] == len(expected)


def test_a_flipped_vector_byte_on_s3_fails_naming_corrupt_file_error_and_the_index_file(
        spark: Any, s3_warehouse: S3Warehouse) -> None:  # noqa: F811
    table = _dv_table(spark, s3_warehouse)
    deletion = next(d for s in table.new_read_builder().new_scan().plan().splits()
                    for d in s.data_deletion_files or [] if d is not None)
    key = deletion.dv_index_path.split(f"{s3_warehouse.bucket}/", 1)[1]
    s3 = boto3.client("s3", endpoint_url=s3_warehouse.server.endpoint, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY, region_name=REGION)
    data = bytearray(s3.get_object(Bucket=s3_warehouse.bucket, Key=key)["Body"].read())
    data[deletion.offset + 12] ^= 0x01  # a byte of the bitmap
    s3.put_object(Bucket=s3_warehouse.bucket, Key=key, Body=bytes(data))
    name = key.rsplit("/", 1)[1]
    with pytest.raises(Exception, match=rf"CorruptFileError(.|\n)*{name}"):
        read(spark, table).collect()
    assert spark.sql("SELECT 1").collect()[0][0] == 1  # the session still works
    with pytest.raises(Exception, match=rf"CorruptFileError(.|\n)*{name}"):
        (spark.read.format("lakehouse").option("warehouse", s3_warehouse.uri)
         .options(**s3_warehouse.options).load("db.dv").collect())


def test_native_read_on_s3_without_an_s3_filesystem_names_the_missing_filesystem(
        spark: Any, s3_warehouse: S3Warehouse) -> None:  # noqa: F811
    table = _dv_table(spark, s3_warehouse)
    with pytest.raises(InvalidArgumentError, match=r"(?s)'s3a'.*hadoop-aws.*native=True"):
        read(spark, table, native=True)
