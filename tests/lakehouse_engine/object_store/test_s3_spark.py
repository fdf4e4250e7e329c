"""Spark local[2] over an S3 warehouse: tasks write and compact data files on S3 themselves, the
driver commits once; credentials reach the executors through the session (executor environment)."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine.spark import compact as spark_compact
from lakehouse_engine.spark import write as spark_write
from lakehouse_engine.spark.tables import TableRef
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.object_store.conftest import ACCESS_KEY, REGION, SECRET_KEY, S3Warehouse
from tests.lakehouse_engine.spark.conftest import ORDERS, orders, spark, spark_session  # noqa: F401

pytestmark = pytest.mark.spark


def test_spark_writes_compacts_and_reads_an_s3_table(spark: Any, s3_warehouse: S3Warehouse) -> None:  # noqa: F811
    # What `spark.executorEnv.AWS_ACCESS_KEY_ID=...` in the session's configuration does: the
    # executors' Python workers get the credentials as environment variables.
    spark.sparkContext.environment.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY,
                                           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION})
    table = create_table(s3_warehouse.catalog(), "orders", ORDERS, primary_keys=["id", "dt"],
                         partition_keys=["dt"], options={"bucket": 2})
    ref = TableRef.of(table)
    assert ref.warehouse == s3_warehouse.uri
    shipped = dict(ref.options)
    assert shipped["s3.endpoint"] == s3_warehouse.server.endpoint
    assert "s3.access-key" not in shipped and "s3.secret-key" not in shipped  # never in a task

    log = s3_warehouse.server.log
    start = log.mark()
    first = spark_write(spark.createDataFrame(orders(120)), table)
    second = spark_write(spark.createDataFrame(orders(60, start=100, tag="v2")), table)
    assert len(first) == 1 and len(second) == 1  # the driver commits once per write
    data_puts = [r for r in log.since(start, s3_warehouse.bucket) if r[0] == "PUT" and "/bucket-" in r[1]]
    assert len(data_puts) >= 6  # tasks wrote the data files to S3 (3 partitions x 2 buckets, twice)
    compacted = spark_compact(spark, table, full=True)
    assert len(compacted) == 1

    expected = rows(read(table), "id")
    assert len(expected) == 160
    df = (spark.read.format("lakehouse").option("warehouse", s3_warehouse.uri)
          .options(**s3_warehouse.options).load("db.orders"))
    assert df.count() == 160
    assert sorted(r["name"] for r in df.filter("id >= 100").select("name").collect()
                  if r["name"] is not None)[:2] == ["v2-100", "v2-101"]
