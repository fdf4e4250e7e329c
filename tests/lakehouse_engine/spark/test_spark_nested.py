"""The `lakehouse` data source reads ARRAY, MAP and ROW columns as Spark arrays, maps and structs,
and `lakehouse_engine.spark.write` writes them back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark.write import write as spark_write
from tests.lakehouse_engine.conftest import create_table, read, rows, write

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("address", pa.struct([pa.field("city", pa.string()),
                                   pa.field("geo", pa.struct([pa.field("lat", pa.float64())]))])),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("scores", pa.map_(pa.string(), pa.int32())),
])


def test_spark_reads_and_writes_nested_columns(spark: Any, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    write(table, pa.table({"id": [1, 2], "address": [{"city": "Oslo", "geo": {"lat": 59.9}}, None],
                           "tags": [["a", None], []], "scores": [[("x", 1)], None]}, schema=SCHEMA))
    df = spark.read.format("lakehouse").option("warehouse", warehouse).load("db.t")
    assert df.schema.simpleString() == (
        "struct<id:bigint,address:struct<city:string,geo:struct<lat:double>>,"
        "tags:array<string>,scores:map<string,int>>")
    got = {r["id"]: r for r in df.collect()}
    assert got[1]["address"]["geo"]["lat"] == 59.9 and got[1]["tags"] == ["a", None]
    assert got[1]["scores"] == {"x": 1} and got[2]["address"] is None and got[2]["tags"] == []
    assert [r[0] for r in df.where("id = 1").select("address.city").collect()] == ["Oslo"]
    copy = create_table(catalog, "copy", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    spark_write(df, copy)
    assert rows(read(catalog.get_table("db.copy")), "id") == rows(read(table), "id")
