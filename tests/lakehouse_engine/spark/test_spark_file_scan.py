"""Writes of a plain parquet scan: the packing tasks read the files themselves (`spark.file_scan`)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_engine import Catalog
from lakehouse_engine.spark import write as spark_write
from lakehouse_engine.spark.file_scan import (
    FilePiece,
    plan_pieces,
    read_footers,
    same_arrow_types,
    scanned_parquet_files,
)
from lakehouse_engine.spark.routing import route_rows
from lakehouse_engine.spark.tables import TableRef
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, key_buckets, live_file_names, orders


def _stage(directory: Path, parts: list[pa.Table], row_group_size: int | None = None) -> str:
    directory.mkdir(parents=True)
    for i, part in enumerate(parts):
        pq.write_table(part, directory / f"part-{i}.parquet", row_group_size=row_group_size)
    return str(directory)


def _reads_files_itself(df: Any, table: Any) -> bool:
    """Whether `route_rows` lets the packing tasks read the files (a Range feeds them, no scan)."""
    plan = route_rows(df, table, TableRef.of(table))._jdf.queryExecution().optimizedPlan().toString()
    return "Range" in plan and "Relation" not in plan


def test_a_plain_scan_is_read_by_the_packing_tasks_and_writes_what_spark_would(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    # Three files; each repeats some keys of its own with later values, so each key's last row
    # in its file must win, as when Spark hands the rows over.
    data = orders(3_000)
    later = orders(200, start=0, tag="v2")
    parts = [pa.concat_tables([data.slice(0, 1_000), later.slice(0, 200)]),  # ids 0-199 again
             data.slice(1_000, 1_000),
             pa.concat_tables([data.slice(2_000, 1_000), orders(100, start=2_000, tag="v2")])]
    source = _stage(tmp_path / "src", parts, row_group_size=300)
    fast = create_table(catalog, "fast", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": 3})
    spark_path = create_table(catalog, "spark_path", ORDERS, primary_keys=["id", "dt"],
                              partition_keys=["dt"], options={"bucket": 3})
    engine = create_table(catalog, "engine", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                          options={"bucket": 3})

    df = spark.read.parquet(source)
    assert _reads_files_itself(df, fast)
    projected = df.select(*reversed(df.columns))  # a projection: Spark hands the rows over
    assert not _reads_files_itself(projected, spark_path)
    spark_write(df, fast)
    spark_write(projected, spark_path)
    for part in parts:
        engine_write(engine, part)

    expected = rows(read(engine), "id")
    assert rows(read(fast), "id") == rows(read(spark_path), "id") == expected
    assert sum(r["name"] is not None and r["name"].startswith("v2") for r in expected) > 0
    assert key_buckets(fast) == key_buckets(engine)
    assert len(live_file_names(fast)) == len(live_file_names(spark_path))


def test_timestamps_with_a_time_zone_get_the_session_zone_as_spark_gives_them(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us"))])
    instants = [datetime.datetime(2026, 3, 29, 0, 30, tzinfo=datetime.timezone.utc),
                datetime.datetime(2026, 11, 24, 23, 59, 59, 123456, tzinfo=datetime.timezone.utc)]
    source = _stage(tmp_path / "src", [pa.table({
        "id": pa.array([1, 2], pa.int64()), "ts": pa.array(instants, pa.timestamp("us", "UTC"))})])
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        fast = create_table(catalog, "ts_fast", schema, primary_keys=["id"], options={"bucket": 2})
        slow = create_table(catalog, "ts_slow", schema, primary_keys=["id"], options={"bucket": 2})
        df = spark.read.parquet(source)
        assert _reads_files_itself(df, fast)
        spark_write(df, fast)
        spark_write(df.select("ts", "id"), slow)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    got = rows(read(fast), "id")
    assert got == rows(read(slow), "id")
    # Wall-clock time in New York (EDT / EST), as Spark's CAST(ts AS TIMESTAMP_NTZ) gives.
    assert [r["ts"] for r in got] == [datetime.datetime(2026, 3, 28, 20, 30),
                                      datetime.datetime(2026, 11, 24, 18, 59, 59, 123456)]


def test_scans_that_are_more_than_a_plain_read_are_left_to_spark(spark: Any, tmp_path: Path) -> None:
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    source = _stage(tmp_path / "src", [data])
    (tmp_path / "hive" / "dt=1").mkdir(parents=True)
    pq.write_table(data, tmp_path / "hive" / "dt=1" / "p.parquet")

    plain = spark.read.parquet(source)
    assert scanned_parquet_files(plain) == [str(tmp_path / "src" / "part-0.parquet")]
    assert scanned_parquet_files(plain.where("id > 1")) is None
    assert scanned_parquet_files(plain.select("v", "id")) is None
    assert scanned_parquet_files(spark.read.option("mergeSchema", "true").parquet(source)) is None
    assert scanned_parquet_files(spark.read.parquet(str(tmp_path / "hive"))) is None  # dt from paths
    assert scanned_parquet_files(spark.createDataFrame(data)) is None


def test_files_whose_types_differ_from_the_dataframes_are_left_to_spark(spark: Any, tmp_path: Path) -> None:
    source = _stage(tmp_path / "src", [
        pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}),
        pa.table({"id": pa.array([2], pa.int32()), "v": ["b"]}),  # Spark reads it as the first's BIGINT
    ])
    files = sorted(str(p) for p in (tmp_path / "src").iterdir())
    df = spark.read.schema("id BIGINT, v STRING").parquet(source)
    assert not same_arrow_types(df, read_footers(files) or [])
    assert same_arrow_types(df, read_footers(files[:1]) or [])
    nested = spark.read.parquet(_stage(tmp_path / "nested", [pa.table({"id": [1], "tags": [["x"]]})]))
    assert not same_arrow_types(nested, read_footers(scanned_parquet_files(nested) or []) or [])


def test_pieces_hold_whole_row_groups_in_file_order(tmp_path: Path) -> None:
    data = pa.table({"id": np.arange(10_000, dtype=np.int64), "pad": ["x" * 100] * 10_000})
    pq.write_table(data, tmp_path / "a.parquet", row_group_size=1_000)
    pq.write_table(data.slice(0, 10), tmp_path / "b.parquet")
    group_bytes = pq.ParquetFile(tmp_path / "a.parquet").metadata.row_group(0).total_byte_size
    pieces = plan_pieces(read_footers([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]) or [],
                         piece_bytes=3 * group_bytes)
    a = str(tmp_path / "a.parquet")
    assert pieces == [FilePiece(a, (0, 1, 2)), FilePiece(a, (3, 4, 5)), FilePiece(a, (6, 7, 8)),
                      FilePiece(a, (9,)), FilePiece(str(tmp_path / "b.parquet"), (0,))]


def test_dynamic_bucket_writes_of_a_plain_scan_read_the_files_too(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    data = orders(2_000)
    source = _stage(tmp_path / "src", [data.slice(0, 1_200), data.slice(1_200)])
    table = create_table(catalog, "dyn", ORDERS, primary_keys=["id"], options={"bucket": "-1"})
    df = spark.read.parquet(source)
    assert _reads_files_itself(df, table)
    spark_write(df, table)
    assert rows(read(table), "id") == rows(data, "id")
