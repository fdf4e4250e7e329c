"""The Structured Streaming source of a table's changes under a hostile user: the table's schema
evolves while the query runs, a query restarts from its checkpoint after the snapshots it needs
expired, and a consumer protects what a query has not read from expiry from the moment it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.spark.changes import register_changes_source
from tests.lakehouse_engine.conftest import write
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put

pytestmark = pytest.mark.spark


def _stream(spark: Any, tmp_path: Path, **options: str) -> Any:
    register_changes_source(spark)
    reader = spark.readStream.format("lakehouse-changes").option("warehouse", str(tmp_path / "warehouse"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load("db.t")


def _run_to_parquet(spark: Any, tmp_path: Path, checkpoint: str, **options: str) -> tuple[list[tuple[Any, ...]],
                                                                                          Exception | None]:
    """An availableNow query into parquet (a sink that restarts from its checkpoint)."""
    out = tmp_path / f"{checkpoint}-out"
    query = (_stream(spark, tmp_path, **options).writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / checkpoint)).trigger(availableNow=True).start())
    error: Exception | None = None
    try:
        query.awaitTermination(120)
    except Exception as exc:  # the query's failure, as Spark reports it
        error = exc
    written = out.exists() and any(out.glob("*.parquet"))
    rows = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) if written else []
    return rows, error


def test_a_running_query_keeps_its_columns_when_the_table_gains_and_renames_columns(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    query = (_stream(spark, tmp_path, **{"start-snapshot": "0"}).writeStream.format("memory")
             .queryName("evolving_changes").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        catalog.alter_table("db.t", [SchemaChange.add_column("extra", pa.int32()),
                                     SchemaChange.rename_column("v", "value")])
        t = catalog.get_table("db.t")
        sid = write(t, pa.table({"id": pa.array([2], pa.int64()), "value": ["b"], "k": ["+I"],
                                 "extra": pa.array([7], pa.int32())}))[0]
        query.processAllAvailable()  # failed: the read's new columns did not cast to the old schema
        rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM evolving_changes").collect())
    finally:
        query.stop()
    assert query.exception() is None
    # The columns the query started with, by field id: `v` is the renamed `value`.
    assert rows == [(1, "+I", 1, "a", "+I"), (sid, "+I", 2, "b", "+I")]


def test_a_consumer_holds_the_snapshots_of_a_query_that_never_committed_a_batch(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    first, error = _run_to_parquet(spark, tmp_path, "c1", **{"consumer-id": "etl", "start-snapshot": "0"})
    assert error is None and first == [(1, "+I", 1, "a", "+I")]
    # An availableNow query ends before Spark commits its last batch: the consumer is recorded
    # at the query's start (it was not at all, and expiry then removed what it had to read).
    assert t.consumer_manager().consumers() == {"etl": 1}
    later = [put(t, (10 + i, "x", "+I")) for i in range(4)]
    t.expire_snapshots(retain_max=1, retain_min=1)
    assert t.snapshot_manager().earliest_snapshot_id() == 1
    again, error = _run_to_parquet(spark, tmp_path, "c2", **{"consumer-id": "etl"})
    assert error is None
    # At least once: the uncommitted first batch is read again, then every later commit.
    assert [r[0] for r in again] == [1, *later]


def test_a_query_restarted_after_its_snapshots_expired_fails_naming_the_missing_snapshot(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    first, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "0"})
    assert error is None and len(first) == 1
    for i in range(4):
        put(t, (10 + i, "x", "+I"))
    t.expire_snapshots(retain_max=1, retain_min=1)
    rows, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "0"})
    assert error is not None and "need snapshot 2, which does not exist" in str(error)
    assert rows == first  # nothing else was read


def test_a_query_whose_table_is_rolled_back_below_what_it_read_fails_instead_of_skipping_commits(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    first, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "0"})
    put(t, (2, "b", "+I"))
    put(t, (3, "c", "+I"))
    second, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "0"})
    assert error is None and [r[0] for r in second] == [1, 2, 3]
    t.rollback_to(1)
    put(t, (4, "d", "+I"))  # snapshot 2 again: before, the query read nothing and went on past it
    rows, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "0"})
    assert error is not None and "rolled back to snapshot 2" in str(error)
    assert rows == second


@pytest.mark.parametrize("producer", ["lookup", "none"])
def test_spark_writes_and_compactions_of_a_dv_table_stream_and_merge_to_the_table(
        spark: Any, catalog: Catalog, tmp_path: Path, producer: str) -> None:
    from lakehouse_engine.spark import compact as spark_compact
    from lakehouse_engine.spark import write as spark_write
    from lakehouse_engine.spark.changes import read_changes
    from tests.lakehouse_engine.conftest import read
    from tests.lakehouse_engine.read.changes_helpers import replay

    t = keyed_table(catalog, **{"deletion-vectors.enabled": "true", "changelog-producer": producer})

    def df(ids: Any, tag: str, kind: str = "+I") -> Any:
        return spark.createDataFrame([(i, f"{tag}{i}", kind) for i in ids], "id bigint, v string, k string")

    query = (_stream(spark, tmp_path, **{"start-snapshot": "0"}).writeStream.format("memory")
             .queryName(f"dv_changes_{producer}").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        for ids, tag, kind in [(range(0, 50), "a", "+I"), (range(20, 70), "b", "+I"),
                               (list(range(0, 70, 9)), "x", "-D"), (range(60, 80), "c", "+I")]:
            spark_write(df(ids, tag, kind), t)
        spark_compact(spark, t, full=True)
        spark_write(df(range(75, 85), "d"), t)
        query.processAllAvailable()
        streamed = [tuple(r) for r in spark.sql(f"SELECT _snapshot_id, _row_kind, id, v FROM dv_changes_{producer}")
                    .collect()]
    finally:
        query.stop()
    table = {r["id"]: r["v"] for r in read(t).to_pylist()}
    # Within a snapshot a key has at most a retraction then an addition: replay those in that order.
    assert replay(sorted(streamed, key=lambda r: (r[0], not r[1].startswith("-")))) == table
    merged = read_changes(spark, t, 0, merged=True).collect()
    # Before: keys deleted then inserted again merged as deleted (DV), deleted keys as +U (lookup).
    assert {r["id"]: r["v"] for r in merged if r["_row_kind"] in ("+I", "+U")} == table


def test_a_start_snapshot_after_the_latest_is_refused_naming_both(spark: Any, catalog: Catalog,
                                                                  tmp_path: Path) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    rows, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "9"})
    assert error is not None and "'start-snapshot' (9) is after the latest snapshot (1)" in str(error)
    assert rows == []


def test_a_query_whose_table_is_rolled_back_and_written_again_past_its_offset_fails(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    import time

    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    put(t, (2, "b", "+I"))
    first, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "0"})
    assert error is None and [r[0] for r in first] == [1, 2]
    t.rollback_to(1)
    time.sleep(0.01)
    for i in range(3):
        put(t, (10 + i, "x", "+I"))  # snapshots 2, 3, 4: before, the query read 3 and 4 only
    rows, error = _run_to_parquet(spark, tmp_path, "ck", **{"start-snapshot": "0"})
    assert error is not None and "snapshot 2, which the query read, is now another snapshot" in str(error)
    assert rows == first


def test_a_query_restarted_from_its_consumer_after_a_rollback_written_again_past_it_fails(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    import time

    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    query = (_stream(spark, tmp_path, **{"consumer-id": "etl", "start-snapshot": "0"}).writeStream
             .format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="50 milliseconds").start())
    try:
        for i in (2, 3):
            query.processAllAvailable()
            put(t, (i, "b", "+I"))
        query.processAllAvailable()
    finally:
        query.stop()
    # Spark commits a batch when it plans the next: the batch of snapshot 2 is the last committed.
    consumer = t.consumer_manager().consumer("etl")
    assert consumer is not None and consumer.next_snapshot == 3
    assert consumer.last_snapshot_millis == t.snapshot(2).time_millis
    t.rollback_to(1)
    time.sleep(0.01)
    for i in range(3):
        put(t, (10 + i, "x", "+I"))  # the consumer's last snapshot is rewritten
    # A new query (new checkpoint) from the consumer: before, it read on past the rewrite.
    rows, error = _run_to_parquet(spark, tmp_path, "ck2", **{"consumer-id": "etl"})
    assert error is not None and "is now another snapshot" in str(error)
    assert rows == []
