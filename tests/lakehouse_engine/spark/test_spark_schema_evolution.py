"""Spark and schema evolution: `spark.write` refuses a DataFrame with a column the table lacks
unless asked to merge the schema (then the column is added first); the data source reports and
reads the evolved schema, and a time-travel read sees the snapshot's own schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, SchemaChange, SchemaError
from lakehouse_engine.spark.write import write as spark_write
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write

pytestmark = pytest.mark.spark

BASE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                  pa.field("qty", pa.int32())])


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    path = str(tmp_path / "warehouse")
    catalog = Catalog(path)
    catalog.create_database("db")
    t = create_table(catalog, "t", BASE, primary_keys=["id"], options={"bucket": 2})
    engine_write(t, pa.table({"id": [1, 2], "name": ["a", "b"], "qty": pa.array([1, 2], pa.int32())}))
    return path


def test_a_new_column_fails_naming_it_unless_merge_schema(spark: Any, warehouse: str) -> None:
    catalog = Catalog(warehouse)
    df = spark.createDataFrame([(3, "c", 3, "red")], "id long, name string, qty int, color string")
    with pytest.raises(SchemaError, match=r"unexpected columns \['color'\].*write.merge-schema"):
        spark_write(df, "db.t", warehouse)
    assert catalog.get_table("db.t").schema.id == 0
    spark_write(df, "db.t", warehouse, merge_schema=True)
    t = catalog.get_table("db.t")
    assert t.schema.field_names == ["id", "name", "qty", "color"] and t.schema.id == 1
    assert rows(read(t), "id") == [
        {"id": 1, "name": "a", "qty": 1, "color": None},
        {"id": 2, "name": "b", "qty": 2, "color": None},
        {"id": 3, "name": "c", "qty": 3, "color": "red"},
    ]
    # merge-schema also fills a nullable column the DataFrame lacks.
    spark_write(spark.createDataFrame([(4, "d")], "id long, name string"), "db.t", warehouse, merge_schema=True)
    assert rows(read(catalog.get_table("db.t")), "id")[-1] == {"id": 4, "name": "d", "qty": None, "color": None}


def test_the_data_source_reports_and_reads_the_evolved_schema(spark: Any, warehouse: str) -> None:
    from lakehouse_engine.spark.datasource import register_data_source

    register_data_source(spark)
    catalog = Catalog(warehouse)
    catalog.alter_table("db.t", [SchemaChange.rename_column("name", "label"),
                                 SchemaChange.update_column_type("qty", "BIGINT"),
                                 SchemaChange.add_column("note", "STRING")])
    load = spark.read.format("lakehouse").option("warehouse", warehouse)
    df = load.load("db.t")
    assert df.schema.simpleString() == "struct<id:bigint,label:string,qty:bigint,note:string>"
    assert sorted(tuple(r) for r in df.collect()) == [(1, "a", 1, None), (2, "b", 2, None)]
    old = load.option("snapshot-id", "1").load("db.t")
    assert old.schema.simpleString() == "struct<id:bigint,name:string,qty:int>"
    assert sorted(tuple(r) for r in old.collect()) == [(1, "a", 1), (2, "b", 2)]
    # The data source's writer merges too, when asked.
    new = spark.createDataFrame([(5, "e", 5, None, 1.5)], "id long, label string, qty long, note string, w double")
    new.write.format("lakehouse").option("warehouse", warehouse).option("write.merge-schema", "true") \
        .mode("append").save("db.t")
    t = catalog.get_table("db.t")
    assert t.schema.field_names[-1] == "w"
    assert rows(read(t), "id")[-1] == {"id": 5, "label": "e", "qty": 5, "note": None, "w": 1.5}
