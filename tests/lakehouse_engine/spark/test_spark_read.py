"""`lakehouse_engine.spark.read`: raw-convertible splits read by Spark's parquet reader, the others
merged by the engine through the `lakehouse` data source (`merge-only`), and the rows always the
engine's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakehouse_engine import Catalog, SchemaChange
from lakehouse_engine.errors import InvalidOptionError, LakehouseError, SchemaError
from lakehouse_engine.spark import read
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, rows
from tests.lakehouse_engine.conftest import read as engine_read
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, orders

pytestmark = pytest.mark.spark


def native_files(df: Any) -> set[str]:
    """The data files Spark's own parquet reader reads for `df`, by name."""
    return {p.rsplit("/", 1)[-1] for p in df.inputFiles()}


def split_files(t: FileStoreTable, raw: bool, snapshot_id: int | None = None) -> set[str]:
    rb = t.new_read_builder()
    if snapshot_id is not None:
        rb = rb.with_snapshot(snapshot_id)
    return {f.file_name for s in rb.new_scan().plan().splits() if s.raw_convertible == raw for f in s.files}


def of_day(data: pa.Table, day: str) -> pa.Table:
    return data.filter(pc.equal(data.column("dt"), day))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> FileStoreTable:
    """After `name` was renamed `label` and `extra` added: dt=21 rewritten under the latest schema
    (raw); dt=22 an old-schema file plus an overlapping level-0 upsert (merged); dt=23 an
    old-schema file only (its `label` is the files' `name`: read by the engine)."""
    catalog = Catalog(str(tmp_path_factory.mktemp("read") / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "mixed", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": 2, "write-only": "true"})
    engine_write(t, orders(90))
    t.compact(full=True)
    catalog.alter_table("db.mixed", [SchemaChange.rename_column("name", "label"),
                                     SchemaChange.add_column("extra", pa.int32())])
    t = catalog.get_table("db.mixed")
    for day, tag in (("2026-11-21", "v2"), ("2026-11-22", "v3")):
        upsert = of_day(orders(45, tag=tag), day).rename_columns(["id", "dt", "label", "amount", "ts"])
        engine_write(t, upsert.append_column("extra", pa.array(range(upsert.num_rows), pa.int32())))
    t.compact(full=True, partitions=[{"dt": "2026-11-21"}])
    return catalog.get_table("db.mixed")


def test_a_compacted_table_is_read_by_sparks_parquet_reader_alone(spark: Any, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": 2})
    engine_write(t, orders(100))
    engine_write(t, orders(50, start=70, tag="v2"))
    t.compact(full=True)
    df = read(spark, t)
    assert "PythonDataSource" not in df._jdf.queryExecution().executedPlan().toString()
    assert native_files(df) == split_files(t, raw=True) and not split_files(t, raw=False)
    assert df.schema.simpleString() == (
        "struct<id:bigint,dt:string,name:string,amount:decimal(12,2),ts:timestamp_ntz>")
    assert rows(df.toArrow(), "id") == rows(engine_read(t), "id")
    assert df.count() == 120


def test_splits_that_need_merging_or_an_old_schema_go_through_the_engine(
        spark: Any, mixed: FileStoreTable) -> None:
    raw = split_files(mixed, raw=True)
    assert raw == {n for n in split_files(mixed, raw=True) | split_files(mixed, raw=False)
                   if n in _files_of(mixed, "2026-11-21")}
    df = read(spark, mixed)
    assert native_files(df) == raw
    expected = rows(engine_read(mixed), "id", "dt")
    assert rows(df.toArrow(), "id", "dt") == expected
    assert {r["label"].split("-")[0] for r in expected if r["label"]} == {"v1", "v2", "v3"}
    assert [r["extra"] for r in expected if r["dt"] == "2026-11-23"] == [None] * 30


def _files_of(t: FileStoreTable, day: str) -> set[str]:
    return {f.file_name for s in t.new_read_builder().new_scan().plan().splits()
            if s.partition_values == (day,) for f in s.files}


def test_columns_partitions_and_time_travel(spark: Any, mixed: FileStoreTable) -> None:
    df = read(spark, mixed, columns=["amount", "id", "dt"], partitions="dt=2026-11-21;dt=2026-11-22")
    assert df.columns == ["amount", "id", "dt"]
    assert rows(df.toArrow(), "id", "dt") == [r for r in rows(engine_read(mixed, projection=["amount", "id", "dt"]),
                                                              "id", "dt") if r["dt"] != "2026-11-23"]
    first = read(spark, mixed, snapshot_id=1)
    assert "extra" not in first.columns  # a snapshot is read with its own schema
    assert native_files(first) == split_files(mixed, raw=True, snapshot_id=1)
    assert rows(first.toArrow(), "id") == rows(engine_read(mixed, snapshot_id=1), "id")
    assert read(spark, mixed).filter("id < 10 AND dt = '2026-11-22'").count() == 3
    v3 = [r for r in engine_read(mixed).to_pylist() if (r["label"] or "").startswith("v3-")]
    assert read(spark, mixed).filter("label LIKE 'v3-%'").count() == len(v3) == 13


def test_deleted_keys_stay_deleted(spark: Any, tmp_path: Path) -> None:
    schema = ORDERS.append(pa.field("kind", pa.string()))
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "k", schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": 1, "rowkind.field": "kind"})
    first = orders(6, days=1)
    engine_write(t, first.append_column("kind", pa.array(["+I"] * 6)))
    engine_write(t, first.slice(2, 1).append_column("kind", pa.array(["-D"])))
    df = read(spark, t, columns=["id"])
    assert not native_files(df)  # the bucket's two files overlap: merged by the engine
    assert sorted(df.toPandas()["id"]) == [0, 1, 3, 4, 5]
    t.compact(full=True)
    df = read(spark, t, columns=["id"])
    assert native_files(df) == split_files(t, raw=True)
    assert sorted(df.toPandas()["id"]) == [0, 1, 3, 4, 5]


def test_native_false_and_types_spark_cannot_read_natively_use_the_data_source(
        spark: Any, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("ns"))])
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "ns", schema, primary_keys=["id"], options={"bucket": 1})
    engine_write(t, pa.table({"id": [1, 2], "ts": pa.array([1_000, 2_000], pa.timestamp("ns"))}, schema=schema))
    df = read(spark, t)
    assert not native_files(df) and df.count() == 2
    assert native_files(read(spark, t, columns=["id"])) == split_files(t, raw=True)
    assert not native_files(read(spark, t, columns=["id"], native=False))


def test_an_empty_table_reads_as_no_rows(spark: Any, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "empty", ORDERS, primary_keys=["id", "dt"], options={"bucket": 1})
    assert read(spark, t).count() == 0
    with pytest.raises(SchemaError, match=r"columns \['nope'\] are not columns of table db.empty"):
        read(spark, t, columns=["id", "nope"])
    with pytest.raises(InvalidOptionError, match="exclude each other"):
        read(spark, t, snapshot_id=1, tag="x")
    with pytest.raises(LakehouseError, match="pass warehouse="):
        read(spark, "db.empty")


def test_files_written_before_a_column_was_added_are_read_natively_with_nulls(
        spark: Any, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "grown", ORDERS, primary_keys=["id", "dt"], options={"bucket": 1})
    engine_write(t, orders(8))
    catalog.alter_table("db.grown", [SchemaChange.add_column("extra", pa.int32())])
    t = catalog.get_table("db.grown")
    engine_write(t, orders(4, start=20).append_column("extra", pa.array([1, 2, 3, 4], pa.int32())))
    df = read(spark, t)
    assert native_files(df) == split_files(t, raw=True) and not split_files(t, raw=False)
    assert rows(df.toArrow(), "id") == rows(engine_read(t), "id")
    assert [r["extra"] for r in rows(df.toArrow(), "id")] == [None] * 8 + [1, 2, 3, 4]


def test_merge_only_reads_exactly_the_splits_read_leaves_to_the_engine(spark: Any, mixed: FileStoreTable) -> None:
    warehouse = str(Path(mixed.path).parent.parent)
    latest = mixed.latest_snapshot()
    assert latest is not None
    source = spark.read.format("lakehouse").option("warehouse", warehouse).option("snapshot-id", str(latest.id))
    merged = source.option("merge-only", "true").load("db.mixed").toArrow()
    raw_days = {s.partition_values for s in mixed.new_read_builder().new_scan().plan().splits() if s.raw_convertible}
    assert raw_days == {("2026-11-21",)}
    assert rows(merged, "id", "dt") == [r for r in rows(engine_read(mixed), "id", "dt") if r["dt"] != "2026-11-21"]
    with pytest.raises(Exception, match="'merge-only' must be true or false"):
        source.option("merge-only", "yes").load("db.mixed").collect()
