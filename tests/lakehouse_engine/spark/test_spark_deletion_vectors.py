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
