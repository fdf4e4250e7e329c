"""Spark writes (`lakehouse_engine.spark.write`) land the same rows in the same buckets as the
engine's own writes, commit once, and never commit the files of a failed task attempt."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidDataError, LakehouseError, SchemaError, UnsupportedError
from lakehouse_engine.spark import write as spark_write
from lakehouse_engine.spark.write import align_timestamps
from lakehouse_engine.write.commit_message import CommitMessage
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, key_buckets, live_file_names, orders

pytestmark = pytest.mark.spark


def _pk_table(catalog: Catalog, name: str, bucket: int = 3) -> Any:
    return create_table(catalog, name, ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": bucket})


def test_fixed_bucket_write_equals_the_engines_write(spark: Any, catalog: Catalog) -> None:
    data = orders(300)
    ours, theirs = _pk_table(catalog, "by_spark"), _pk_table(catalog, "by_engine")
    ids = spark_write(spark.createDataFrame(data), ours)
    engine_write(theirs, data)

    assert ids == [1] and len(ours.snapshots()) == 1
    assert rows(read(ours), "id") == rows(read(theirs), "id") == rows(data, "id")
    assert key_buckets(ours) == key_buckets(theirs)
    # One writer per (partition, bucket): a single level-0 file in each bucket.
    assert len(live_file_names(ours)) == len(set(key_buckets(ours).values()))


def test_upserts_through_spark_keep_the_latest_row_per_key(spark: Any, catalog: Catalog) -> None:
    table = _pk_table(catalog, "upserts", bucket=2)
    spark_write(spark.createDataFrame(orders(100)), table)
    spark_write(spark.createDataFrame(orders(60, start=50, tag="v2")), table)

    expected = {r["id"]: r for r in orders(100).to_pylist()}
    expected.update({r["id"]: r for r in orders(60, start=50, tag="v2").to_pylist()})
    assert rows(read(table), "id") == sorted(expected.values(), key=lambda r: r["id"])


def test_rescaled_partition_keeps_its_own_bucket_count(spark: Any, catalog: Catalog) -> None:
    ours, theirs = _pk_table(catalog, "rescaled", bucket=2), _pk_table(catalog, "reference", bucket=2)
    for table in (ours, theirs):  # partition 2026-11-21 holds 5 buckets, the table says 2
        engine_write(table.copy({"bucket": "5"}), orders(30, days=1))

    data = orders(90, start=30)
    spark_write(spark.createDataFrame(data), ours)
    engine_write(theirs, data)

    buckets = key_buckets(ours)
    assert buckets == key_buckets(theirs)
    assert max(b for (dt,), b in buckets.values() if dt == "2026-11-21") >= 2
    assert max(b for (dt,), b in buckets.values() if dt != "2026-11-21") <= 1


def test_append_tables_get_the_same_rows(spark: Any, catalog: Catalog) -> None:
    unaware = create_table(catalog, "log", ORDERS, partition_keys=["dt"])
    bucketed = create_table(catalog, "log_b", ORDERS, partition_keys=["dt"],
                            options={"bucket": 2, "bucket-key": "id"})
    reference = create_table(catalog, "log_b_ref", ORDERS, partition_keys=["dt"],
                             options={"bucket": 2, "bucket-key": "id"})
    data = orders(200)
    df = spark.createDataFrame(data).repartition(3)
    spark_write(df, unaware)
    spark_write(df, bucketed)
    engine_write(reference, data)

    assert rows(read(unaware), "id") == rows(data, "id")
    assert rows(read(bucketed), "id") == rows(data, "id")
    assert key_buckets(bucketed) == key_buckets(reference)


def test_overwrite_replaces_one_partition_or_the_table(spark: Any, catalog: Catalog) -> None:
    table = _pk_table(catalog, "ow")
    spark_write(spark.createDataFrame(orders(90)), table)
    replacement = orders(5, start=1000, days=1)

    spark_write(spark.createDataFrame(replacement), table, overwrite={"dt": "2026-11-21"})
    kept = [r for r in orders(90).to_pylist() if r["dt"] != "2026-11-21"]
    assert rows(read(table), "id") == sorted(kept + replacement.to_pylist(), key=lambda r: r["id"])

    spark_write(spark.createDataFrame(replacement), table, overwrite=True)
    assert rows(read(table), "id") == rows(replacement, "id")
    assert [s.commit_kind for s in table.snapshots()] == ["APPEND", "OVERWRITE", "OVERWRITE"]


def test_overwrite_with_rows_of_another_partition_commits_nothing(spark: Any, catalog: Catalog) -> None:
    table = _pk_table(catalog, "ow_bad")
    spark_write(spark.createDataFrame(orders(30)), table)
    before = set(Path(table.path).rglob("*.parquet"))

    with pytest.raises(InvalidDataError, match="2026-11-21"):
        spark_write(spark.createDataFrame(orders(30)), table, overwrite={"dt": "2026-11-21"})
    assert len(table.snapshots()) == 1
    assert set(Path(table.path).rglob("*.parquet")) == before  # the rejected files were deleted


def test_spark_timestamps_become_wall_clock_time_in_the_session_time_zone() -> None:
    instant = datetime.datetime(2026, 11, 21, 7, 30, tzinfo=datetime.timezone.utc)
    batch = pa.table({"id": [1], "ts": pa.array([instant], pa.timestamp("us", tz="Europe/Berlin"))})
    aligned = align_timestamps(batch, ORDERS)
    assert aligned.schema.field("ts").type == pa.timestamp("us")
    assert aligned.column("ts").to_pylist() == [datetime.datetime(2026, 11, 21, 8, 30)]


def test_overwrite_of_a_non_partition_field_fails_before_writing(spark: Any, catalog: Catalog) -> None:
    table = _pk_table(catalog, "ow_key")
    with pytest.raises(LakehouseError, match="not partition keys"):
        spark_write(spark.createDataFrame(orders(3)), table, overwrite={"id": 1})
    assert not list(Path(table.path).rglob("*.parquet"))


def test_dataframe_must_have_the_tables_columns(spark: Any, catalog: Catalog) -> None:
    table = _pk_table(catalog, "cols")
    with pytest.raises(SchemaError, match=r"missing columns \['ts'\]"):
        spark_write(spark.createDataFrame(orders(3).drop_columns(["ts"])), table)


def test_dynamic_and_postpone_bucket_modes_are_not_supported_yet(spark: Any, catalog: Catalog) -> None:
    dynamic = create_table(catalog, "dyn", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"])
    postpone = _pk_table(catalog, "post", bucket=-2)
    df = spark.createDataFrame(orders(3))
    with pytest.raises(UnsupportedError, match="dynamic bucket"):
        spark_write(df, dynamic)
    with pytest.raises(UnsupportedError, match="postpone bucket"):
        spark_write(df, postpone)


def test_a_failed_task_attempt_is_retried_and_its_files_never_committed(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    table = _pk_table(catalog, "retried")
    markers = tmp_path / "failed-attempts"
    markers.mkdir()
    marker_dir = str(markers)

    def fail_first_attempt(messages: list[CommitMessage]) -> None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0 and messages:
            files = [f.file_name for m in messages for f in m.new_files]
            (Path(marker_dir) / f"partition-{ctx.partitionId()}").write_text(json.dumps(files))
            raise RuntimeError("injected failure after this attempt wrote its files")

    data = orders(200)
    ids = spark_write(spark.createDataFrame(data), table, _task_hook=fail_first_attempt)

    failed_files = {f for p in markers.iterdir() for f in json.loads(p.read_text())}
    on_disk = {p.name for p in Path(table.path).rglob("data-*")}
    assert failed_files and failed_files <= on_disk  # the failed attempts did write files
    assert ids == [1]
    assert rows(read(table), "id") == rows(data, "id")  # every row exactly once
    assert not failed_files & live_file_names(table)
    assert live_file_names(table) | failed_files == on_disk  # the rest are orphans, nothing else
