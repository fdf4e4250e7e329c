"""Spark writes (`lakehouse_engine.spark.write`) land the same rows in the same buckets as the
engine's own writes (dynamic bucket tables: a layout with the same guarantees), commit once, and
never commit the files of a failed task attempt."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.bucket.dynamic import assigner_of
from lakehouse_engine.errors import InvalidDataError, LakehouseError, SchemaError, UnsupportedError
from lakehouse_engine.format.bucket_hash import hash_int, hash_rows
from lakehouse_engine.spark import compact as spark_compact
from lakehouse_engine.spark import write as spark_write
from lakehouse_engine.spark.routing import route_rows, route_values
from lakehouse_engine.spark.tables import BucketMode, TableRef, align_timestamps, check_writable
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_message import CommitMessage
from tests.interop.conftest import run_pypaimon
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, key_buckets, live_file_names, orders

pytestmark = pytest.mark.spark


def _pk_table(catalog: Catalog, name: str, bucket: int = 3) -> Any:
    return create_table(catalog, name, ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": bucket})


def fail_first_attempts(markers: Path) -> Callable[[list[CommitMessage]], None]:
    """A task hook failing each task's first attempt after its files are written; it records the
    attempt's data files (new and compaction outputs) and index files in `markers`."""
    markers.mkdir()
    marker_dir = str(markers)

    def fail_first_attempt(messages: list[CommitMessage]) -> None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0 and messages:
            files = {"data": [f.file_name for m in messages for f in m.new_files + m.compact_after],
                     "index": [e.file_name for m in messages for e in m.new_index_files]}
            (Path(marker_dir) / f"partition-{ctx.partitionId()}").write_text(json.dumps(files))
            raise RuntimeError("injected failure after this attempt wrote its files")

    return fail_first_attempt


def failed_attempts(markers: Path) -> list[dict[str, list[str]]]:
    """What the failed attempts recorded: one dict of 'data' and 'index' file names each."""
    return [json.loads(p.read_text()) for p in markers.iterdir()]


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


def test_the_data_source_check_refuses_dynamic_and_postpone_tables(catalog: Catalog) -> None:
    dynamic = create_table(catalog, "dyn", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"])
    postpone = _pk_table(catalog, "post", bucket=-2)
    with pytest.raises(UnsupportedError, match="dynamic bucket"):
        check_writable(dynamic)
    with pytest.raises(UnsupportedError, match="postpone bucket"):
        check_writable(postpone)
    assert BucketMode.of(dynamic) is BucketMode.DYNAMIC  # `write` routes rows and takes them both
    assert BucketMode.of(postpone) is BucketMode.POSTPONE


def test_a_failed_task_attempt_is_retried_and_its_files_never_committed(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    table = _pk_table(catalog, "retried")
    markers = tmp_path / "failed-attempts"
    data = orders(200)
    ids = spark_write(spark.createDataFrame(data), table, _task_hook=fail_first_attempts(markers))

    failed_files = {f for m in failed_attempts(markers) for f in m["data"]}
    on_disk = {p.name for p in Path(table.path).rglob("data-*")}
    assert failed_files and failed_files <= on_disk  # the failed attempts did write files
    assert ids == [1]
    assert rows(read(table), "id") == rows(data, "id")  # every row exactly once
    assert not failed_files & live_file_names(table)
    assert live_file_names(table) | failed_files == on_disk  # the rest are orphans, nothing else


# ---- dynamic bucket, cross-partition and postpone tables ----------------------------------------
TARGET = 20  # dynamic-bucket.target-row-num: 100 keys a partition make at least 5 buckets


def _dynamic_table(catalog: Catalog, name: str, assigners: int | None = 3) -> FileStoreTable:
    # Writers compact every bucket they add a sorted run to (any bucket under 64 MB).
    options: dict[str, Any] = {"bucket": -1, "dynamic-bucket.target-row-num": TARGET,
                               "compaction.total-size-threshold": "64 mb"}
    if assigners is not None:
        options["dynamic-bucket.assigner-parallelism"] = assigners
    return create_table(catalog, name, ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options=options)


def _keys_per_bucket(table: FileStoreTable) -> dict[tuple[tuple[Any, ...], int], list[int]]:
    """The ids each (partition, bucket) holds in the latest snapshot (a key twice shows twice)."""
    rb = table.new_read_builder().with_projection(["id"])
    read_ = rb.new_read()
    out: dict[tuple[tuple[Any, ...], int], list[int]] = {}
    for split in rb.new_scan().plan().splits():
        out.setdefault((split.partition_values, split.bucket), []).extend(
            read_.read_split(split).column("id").to_pylist())
    return out


def _assigners(table: FileStoreTable, ids: list[int], n: int) -> list[int]:
    hashes = hash_rows([pa.array(ids, pa.int64())], table.schema.types_of(["id"]))
    return [int(a) for a in assigner_of(hashes, n)]


def _check_dynamic_layout(table: FileStoreTable, num_assigners: int | None) -> None:
    """No key in two buckets, no bucket over the target; with n: bucket b holds assigner b % n's keys."""
    per_bucket = _keys_per_bucket(table)
    counts = Counter(k for keys in per_bucket.values() for k in keys)
    assert [k for k, c in counts.items() if c > 1] == []
    assert max(len(keys) for keys in per_bucket.values()) <= TARGET
    if num_assigners is not None:
        for (_, bucket), keys in per_bucket.items():
            assert set(_assigners(table, keys, num_assigners)) == {bucket % num_assigners}


def _latest(*batches: pa.Table) -> list[dict[str, Any]]:
    expected: dict[Any, dict[str, Any]] = {}
    for batch in batches:
        expected.update({r["id"]: r for r in batch.to_pylist()})
    return sorted(expected.values(), key=lambda r: r["id"])


def test_route_values_send_assigner_i_to_spark_task_i(spark: Any) -> None:
    from pyspark.sql import functions as F

    values = spark.range(-1000, 1000, 97).select(F.col("id").cast("int").alias("v"))
    assert all(hash_int(r.v) == r.h for r in values.select("v", F.hash("v").alias("h")).collect())
    for n in (2, 3, 7):
        routes = spark.createDataFrame([(v, i) for i, v in enumerate(route_values(n))], "route INT, i INT")
        placed = routes.repartition(n, "route").select("i", F.spark_partition_id().alias("task")).collect()
        assert sorted((r.i, r.task) for r in placed) == [(i, i) for i in range(n)]


def test_dynamic_bucket_write_equals_the_engines_write(spark: Any, catalog: Catalog) -> None:
    ours, theirs = _dynamic_table(catalog, "dyn_spark"), _dynamic_table(catalog, "dyn_engine")
    first, second = orders(300), orders(150, start=225, tag="v2")  # 75 updates, 75 new keys
    spark_write(spark.createDataFrame(first).repartition(4), ours)
    engine_write(theirs, first)
    assert rows(read(ours), "id") == rows(read(theirs), "id") == rows(first, "id")
    _check_dynamic_layout(ours, 3)
    placed = key_buckets(ours)
    assert {b % 3 for _, b in placed.values()} == {0, 1, 2}  # every assigner made buckets
    assert all(len({b for (dt,), b in placed.values() if dt == day}) >= 100 // TARGET
               for day in ("2026-11-21", "2026-11-22", "2026-11-23"))

    spark_write(spark.createDataFrame(second).repartition(4), ours)
    engine_write(theirs, second)
    assert rows(read(ours), "id") == rows(read(theirs), "id") == _latest(first, second)
    _check_dynamic_layout(ours, 3)
    again = key_buckets(ours)
    assert {k: again[k] for k in placed} == placed  # updated keys stayed in their buckets
    # Each task is its buckets' only writer, so it compacted them.
    assert [s.commit_kind for s in ours.snapshots()] == ["APPEND", "APPEND", "COMPACT"]


def test_dynamic_table_indexed_by_other_assigner_counts_is_written_without_compaction(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    # The engine's single writer (one assigner) indexed these keys: a bucket holds keys of all
    # three Spark assigners, so three tasks update it and none may compact it.
    table, reference = _dynamic_table(catalog, "dyn_mixed"), _dynamic_table(catalog, "dyn_mixed_ref")
    first, second = orders(300), orders(150, start=225, tag="v2")
    for t in (table, reference):
        engine_write(t, first)
    placed = key_buckets(table)
    with pytest.raises(AssertionError):
        _check_dynamic_layout(table, 3)
    reports = tmp_path / "tasks"
    reports.mkdir()
    report_dir = str(reports)

    def report(messages: list[CommitMessage]) -> None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        written = [[m.partition.hex(), m.bucket, bool(m.compact_before or m.compact_after)] for m in messages]
        (Path(report_dir) / f"task-{ctx.partitionId()}").write_text(json.dumps(written))

    spark_write(spark.createDataFrame(second).repartition(4), table, _task_hook=report)
    engine_write(reference, second)
    tasks = [json.loads(p.read_text()) for p in reports.iterdir()]
    writers = Counter((part, bucket) for task in tasks for part, bucket, _ in task)
    assert len(tasks) == 3 and max(writers.values()) == 3  # three tasks shared a bucket
    assert not any(compacted for task in tasks for *_, compacted in task)
    assert rows(read(table), "id") == rows(read(reference), "id") == _latest(first, second)
    _check_dynamic_layout(table, None)
    again = key_buckets(table)
    assert {k: again[k] for k in placed} == placed
    assert [s.commit_kind for s in table.snapshots()] == ["APPEND", "APPEND"]
    # New keys went to buckets of their own assigner only.
    new_ids = [k for k in again if k not in placed]
    assert all(again[k][1] % 3 == a for k, a in zip(new_ids, _assigners(table, new_ids, 3), strict=True))


def test_dynamic_bucket_overwrite_starts_from_an_empty_index(spark: Any, catalog: Catalog) -> None:
    table = _dynamic_table(catalog, "dyn_ow")
    spark_write(spark.createDataFrame(orders(300)), table)
    replacement = orders(60, start=1000, days=1)  # all in 2026-11-21
    spark_write(spark.createDataFrame(replacement), table, overwrite={"dt": "2026-11-21"})
    kept = [r for r in orders(300).to_pylist() if r["dt"] != "2026-11-21"]
    assert rows(read(table), "id") == sorted(kept + replacement.to_pylist(), key=lambda r: r["id"])
    _check_dynamic_layout(table, 3)
    day = {k: b for k, ((dt,), b) in key_buckets(table).items() if dt == "2026-11-21"}
    # The old index (its 5 full buckets) is gone: assigner i fills buckets i, i + 3, ... afresh.
    per_assigner = Counter(_assigners(table, list(day), 3))
    assert set(day.values()) == {i + 3 * j for i, n in per_assigner.items() for j in range(-(-n // TARGET))}


def test_cross_partition_upsert_write_equals_the_engines_write(spark: Any, catalog: Catalog) -> None:
    def table(name: str) -> FileStoreTable:
        return create_table(catalog, name, ORDERS, primary_keys=["id"], partition_keys=["dt"],
                            options={"bucket": -1, "dynamic-bucket.target-row-num": TARGET})

    ours, theirs = table("cross_spark"), table("cross_engine")
    first = orders(120)
    second = orders(60, start=60, days=2, tag="v2")  # ids 60..119 again, many in another partition
    for batch in (first, second):
        spark_write(spark.createDataFrame(batch).repartition(3), ours)
        engine_write(theirs, batch)
    assert rows(read(ours), "id") == rows(read(theirs), "id") == _latest(first, second)
    per_bucket = _keys_per_bucket(ours)
    assert sorted(k for keys in per_bucket.values() for k in keys) == list(range(120))  # each key once
    assert max(len(keys) for keys in per_bucket.values()) <= TARGET


def test_postpone_rows_are_invisible_until_compaction(spark: Any, catalog: Catalog) -> None:
    ours, theirs = _pk_table(catalog, "post_spark", bucket=-2), _pk_table(catalog, "post_engine", bucket=-2)
    first, second = orders(200), orders(100, start=150, tag="v2")
    df = spark.createDataFrame(first).repartition(3)
    assert route_rows(df, ours, TableRef.of(ours)) is df  # no assignment, no shuffle
    spark_write(df, ours)
    spark_write(spark.createDataFrame(second).repartition(2), ours)
    for batch in (first, second):
        engine_write(theirs, batch)
    assert read(ours).num_rows == 0
    assert {b for _, b in _bucket_files(ours)} == {-2}

    ids = spark_compact(spark, ours)
    theirs.compact()
    assert ids and ours.snapshot(ids[0]).commit_kind == "COMPACT"
    assert rows(read(ours), "id") == rows(read(theirs), "id") == _latest(first, second)
    assert -2 not in {b for _, b in _bucket_files(ours)}
    assert key_buckets(ours) == key_buckets(theirs)


def _bucket_files(table: FileStoreTable) -> list[tuple[bytes, int]]:
    latest = table.latest_snapshot()
    assert latest is not None
    return [(e.partition, e.bucket) for e in table.store.manifest_io().live_entries(latest)]


@pytest.mark.interop
def test_pypaimon_reads_a_spark_written_dynamic_bucket_table(spark: Any, catalog: Catalog) -> None:
    table = _dynamic_table(catalog, "dyn_interop")
    spark_write(spark.createDataFrame(orders(150)), table)
    spark_write(spark.createDataFrame(orders(90, start=100, tag="v2")), table)

    got = run_pypaimon("""
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
rb = catalog.get_table(ARGS["table"]).new_read_builder()
emit(sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist(), key=lambda r: r["id"]))
""", warehouse=catalog.warehouse, table="db.dyn_interop")

    def as_text(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: None if v is None else str(v) for k, v in r.items()} for r in rs]

    ours = sorted(read(table).to_pylist(), key=lambda r: r["id"])
    assert len(ours) == 190
    assert as_text(got) == as_text(ours)


def test_a_failed_dynamic_bucket_task_attempt_is_never_committed(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    table = _dynamic_table(catalog, "dyn_retried")
    markers = tmp_path / "failed-attempts"
    data = orders(300)
    ids = spark_write(spark.createDataFrame(data), table, _task_hook=fail_first_attempts(markers))

    failed = failed_attempts(markers)
    assert len(failed) == 3  # every assigner's task failed once
    failed_data = {f for m in failed for f in m["data"]}
    failed_index = {f for m in failed for f in m["index"]}
    on_disk = {p.name for p in Path(table.path).rglob("data-*")}
    index_on_disk = {p.name for p in (Path(table.path) / "index").iterdir()}
    latest = table.latest_snapshot()
    assert latest is not None and ids == [latest.id]
    live_index = {e.file_name for e in table.store.manifest_io().read_index_manifest(latest.index_manifest)}
    assert failed_data and failed_data <= on_disk and failed_index and failed_index <= index_on_disk
    assert rows(read(table), "id") == rows(data, "id")  # every row exactly once
    _check_dynamic_layout(table, 3)
    assert not failed_data & live_file_names(table) and not failed_index & live_index
    assert live_file_names(table) | failed_data == on_disk  # the rest are orphans, nothing else
    assert live_index | failed_index == index_on_disk
    assert np.array_equal(sorted(e.row_count for e in table.store.manifest_io().read_index_manifest(
        latest.index_manifest)), sorted(len(k) for k in _keys_per_bucket(table).values()))
