"""Spark reads a table's changes: a range as a DataFrame with row kinds, and a Structured
Streaming query whose offsets are snapshot ids, over commits made while it runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark.changes import read_changes, register_changes_source
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put

pytestmark = pytest.mark.spark


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def test_a_range_of_changes_is_a_dataframe_with_row_kinds(spark: Any, catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"), (2, "b", "+I"))
    put(t, (1, "a2", "+U"), (2, "b", "-D"))
    put(t, (3, "c", "+I"))
    df = read_changes(spark, t, 1, 2)
    assert df.columns == ["_snapshot_id", "_row_kind", "id", "v", "k"]
    assert _rows(df) == [(2, "+U", 1, "a2", "+U"), (2, "-D", 2, "b", "-D")]
    assert _rows(read_changes(spark, t, 0).select("_snapshot_id", "_row_kind", "id")) == [
        (1, "+I", 1), (1, "+I", 2), (2, "+U", 1), (2, "-D", 2), (3, "+I", 3)]
    merged = read_changes(spark, t, 0, merged=True)
    assert _rows(merged) == [("+I", 3, "c", "+I"), ("+U", 1, "a2", "+U")]


def test_a_streaming_query_reads_commits_made_while_it_runs_and_moves_its_consumer(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog)
    first = put(t, (1, "a", "+I"))  # before the query: read in full (scan.mode latest-full)
    register_changes_source(spark)
    stream = (spark.readStream.format("lakehouse-changes").option("warehouse", str(tmp_path / "warehouse"))
              .option("consumer-id", "spark").load("db.t"))
    query = (stream.writeStream.format("memory").queryName("lakehouse_changes")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())

    def seen() -> list[tuple[Any, ...]]:
        return [tuple(r) for r in spark.sql("SELECT * FROM lakehouse_changes").collect()]

    try:
        query.processAllAvailable()  # started: the latest snapshot is decided when the query starts
        expected = [(first, "+I", 1)]
        for i in range(3):
            sid = put(t, (10 + i, f"v{i}", "+I"), (1, f"a{i}", "+U"))
            expected += [(sid, "+I", 10 + i), (sid, "+U", 1)]
            time.sleep(0.3)
        expected.append((put(t, (1, None, "-D")), "-D", 1))
        query.processAllAvailable()
        rows = seen()
        # Spark commits a micro-batch's end offset when it plans the next batch: the consumer
        # then reads on after what the query has processed.
        last = put(t, (99, "z", "+I"))  # after it, the writer may compact: a COMPACT snapshot
        query.processAllAvailable()
        consumed = t.consumer_manager().consumers()
        later = seen()
    finally:
        query.stop()
    assert query.exception() is None
    assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(expected)
    assert sorted((r[0], r[1], r[2]) for r in later) == sorted(expected + [(last, "+I", 99)])
    assert 2 < consumed["spark"] <= last
    # A new query with the same consumer id starts where the consumer is: nothing is read twice
    # that the old query had committed.
    again = (spark.readStream.format("lakehouse-changes").option("warehouse", str(tmp_path / "warehouse"))
             .option("consumer-id", "spark").load("db.t"))
    q2 = (again.writeStream.format("memory").queryName("lakehouse_changes_again")
          .option("checkpointLocation", str(tmp_path / "checkpoint2")).trigger(availableNow=True).start())
    q2.awaitTermination(120)
    resumed = [tuple(r) for r in spark.sql("SELECT * FROM lakehouse_changes_again").collect()]
    assert sorted(r[0] for r in resumed) == sorted(s for s, _, _ in expected + [(last, "+I", 99)]
                                                   if s >= consumed["spark"])
