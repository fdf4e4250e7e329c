"""Spark reads and writes a branch: `spark.read`/`spark.write` of a branch table, and the
`lakehouse` data source on `db.t$branch_b`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import lakehouse_engine.spark as lakehouse_spark
from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def _pairs(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


def test_spark_writes_and_reads_a_branch_and_main_stays(spark: Any, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": 2})
    write(table, _rows([1, 2, 3], 1))
    table.create_tag("t1")
    table.create_branch("b", "t1")
    branch = catalog.get_table("db.t$branch_b")
    lakehouse_spark.write(spark.createDataFrame(_rows([3, 4], 5).to_pandas()), branch)
    expected = [(1, 1), (2, 1), (3, 5), (4, 5)]
    assert _pairs(read(catalog.get_table("db.t$branch_b"))) == expected
    assert _pairs(read(catalog.get_table("db.t"))) == [(1, 1), (2, 1), (3, 1)]
    assert _pairs(lakehouse_spark.read(spark, branch).toArrow()) == expected
    loaded = spark.read.format("lakehouse").option("warehouse", catalog.warehouse).load("db.t$branch_b")
    assert _pairs(loaded.toArrow()) == expected
    spark.createDataFrame(_rows([9], 9).to_pandas()).write.format("lakehouse").mode("append") \
        .option("warehouse", catalog.warehouse).save("db.t$branch_b")
    assert _pairs(read(catalog.get_table("db.t$branch_b"))) == expected + [(9, 9)]
    assert _pairs(read(catalog.get_table("db.t"))) == [(1, 1), (2, 1), (3, 1)]
