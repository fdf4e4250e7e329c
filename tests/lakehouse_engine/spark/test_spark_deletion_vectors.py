"""`spark.read` of a deletion-vector table (Paimon 0.9 wrote it): every split by Spark's parquet
reader, the rows the vectors mark removed by their position in their file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark import read
from tests.lakehouse_engine.read.dv_fixture import JAVA_READS, copy_table

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("snapshot", [6, 9])
def test_a_dv_table_reads_through_sparks_parquet_reader_without_the_marked_rows(
        spark: Any, tmp_path: Path, snapshot: int) -> None:
    copy_table(tmp_path)
    table = Catalog(str(tmp_path)).get_table("db.t")
    splits = table.new_read_builder().with_snapshot(snapshot).new_scan().plan().splits()
    assert all(s.raw_convertible for s in splits)
    assert any(d is not None for s in splits for d in s.data_deletion_files or [])
    df = read(spark, table, snapshot_id=snapshot)
    assert "PythonDataSource" not in df._jdf.queryExecution().executedPlan().toString()
    got = sorted(tuple(r) for r in df.collect())
    assert got == sorted(tuple(r[1:]) for r in JAVA_READS[snapshot])
    # A projection and a filter on top of the anti-join keep the positions right.
    ids = sorted(r[0] for r in read(spark, table, snapshot_id=snapshot, columns=["id"]).where("id > 100").collect())
    assert ids == sorted(r[1] for r in JAVA_READS[snapshot] if r[1] > 100)


def test_the_lakehouse_data_source_applies_the_vectors_on_executors(spark: Any, tmp_path: Path) -> None:
    copy_table(tmp_path)
    table = Catalog(str(tmp_path)).get_table("db.t")
    df = read(spark, table, snapshot_id=6, native=False)
    assert "BatchScan lakehouse" in df._jdf.queryExecution().executedPlan().toString()
    assert sorted(tuple(r) for r in df.collect()) == sorted(tuple(r[1:]) for r in JAVA_READS[6])


def test_a_dv_table_we_wrote_reads_through_spark_as_the_engine_reads_it(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa

    from tests.lakehouse_engine.conftest import create_table, write
    from tests.lakehouse_engine.conftest import read as engine_read

    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    table = create_table(catalog, "w", schema, ["id"], options={"bucket": "2", "deletion-vectors.enabled": "true"})
    for tag, ids in (("a", range(0, 300)), ("b", range(100, 200)), ("c", range(150, 400, 3))):
        write(table, pa.table({"id": list(ids), "v": [f"{tag}{i}" for i in ids]}, schema=schema))
    splits = table.new_read_builder().new_scan().plan().splits()
    assert any(d is not None for s in splits for d in s.data_deletion_files or [])
    expected = sorted(tuple(r.values()) for r in engine_read(table).to_pylist())
    assert len(expected) == 300 + len(range(300, 400, 3))
    assert sorted(tuple(r) for r in read(spark, table).collect()) == expected
    assert sorted(tuple(r) for r in read(spark, table, native=False).collect()) == expected
