"""Where the Structured Streaming source starts is where the Python stream starts
(read/stream_start.py): the consumer named by the table's `consumer-id` option too, `scan.mode`
and its options stored in the table or given as reader options, a full first read, a start that
waits for its snapshot, and conflicting start options refused as the Python stream refuses them.
Each query runs while commits are made; its rows are compared with the Python stream's plans over
the same commits. Before, the source read only its own `consumer-id` option and started after the
latest snapshot whatever `scan.mode` said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.read.streaming_scan import StreamingTableScan
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.spark.changes import register_changes_source
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put

pytestmark = pytest.mark.spark

Row = tuple[int, str, int, Any]


def _start(spark: Any, tmp_path: Path, name: str, options: dict[str, str]) -> Any:
    register_changes_source(spark)
    reader = spark.readStream.format("lakehouse-changes").option("warehouse", str(tmp_path / "warehouse"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load("db.t").writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / name)).trigger(processingTime="100 milliseconds").start())
    query.processAllAvailable()  # the query has started: where it starts is decided
    return query


def _seen(spark: Any, name: str) -> list[Row]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT _snapshot_id, _row_kind, id, v FROM {name}").collect())


class _PythonStream:
    """The Python stream of the same table and options, planned step by step."""

    def __init__(self, table: FileStoreTable):
        builder = table.new_stream_read_builder().with_include_row_kind()
        self.scan: StreamingTableScan = builder.new_streaming_scan()
        self.read = builder.new_read()
        self.rows: list[Row] = []

    def drain(self) -> None:
        while True:
            started = self.scan.next_snapshot_id is not None
            plan = self.scan.plan()
            if plan.snapshot is None and started:
                return
            if plan.snapshot is None:
                if self.scan.next_snapshot_id is None:
                    return  # waits for the snapshot its start reads
                continue
            for r in self.read.to_arrow(plan.splits()).to_pylist():
                self.rows.append((plan.snapshot.id, r["_row_kind"], r["id"], r["v"]))


def _history(catalog: Catalog) -> FileStoreTable:
    """Snapshots 1-3 appends, 4 a full compaction, 5 an append."""
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"), (2, "b", "+I"))
    put(t, (3, "c", "+I"))
    put(t, (1, "a2", "+U"))
    t.compact(full=True)
    put(t, (4, "d", "+I"))
    return t


@pytest.mark.parametrize("where", ["reader", "stored"])
@pytest.mark.parametrize("start", [
    {},
    {"scan.mode": "latest"},
    {"scan.mode": "full"},
    {"scan.mode": "from-snapshot", "scan.snapshot-id": "2"},
    {"scan.snapshot-id": "3"},
    {"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"},
    {"scan.mode": "from-timestamp", "scan.timestamp-millis": "<2>"},
    {"scan.mode": "compacted-full"},
], ids=["default", "latest", "full", "from-snapshot", "default-snapshot-id", "from-snapshot-full",
        "from-timestamp", "compacted-full"])
def test_a_query_starts_where_the_python_stream_starts(spark: Any, catalog: Catalog, tmp_path: Path,
                                                       start: dict[str, str], where: str) -> None:
    t = _history(catalog)
    options = {k: (str(t.snapshot(2).time_millis) if v == "<2>" else v) for k, v in start.items()}
    if where == "stored" and options:
        catalog.alter_table("db.t", [SchemaChange.set_option(k, v) for k, v in options.items()])
        t = catalog.get_table("db.t")
    python = _PythonStream(t.copy(options) if where == "reader" and options else t)
    query = _start(spark, tmp_path, f"start_{where}", options if where == "reader" else {})
    try:
        python.drain()
        put(t, (2, None, "-D"))
        put(t, (5, "e", "+I"), (3, "c2", "+U"))
        query.processAllAvailable()
        rows = _seen(spark, f"start_{where}")
    finally:
        query.stop()
    python.drain()
    assert query.exception() is None
    assert rows == sorted(python.rows)
    assert rows  # every mode reads something here


def test_the_tables_consumer_id_is_the_querys_consumer(spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog, **{"consumer-id": "etl"})
    for i in (1, 2, 3):
        put(t, (i, "a", "+I"))
    t.consumer_manager().reset_consumer("etl", 3)  # it has read snapshots 1 and 2
    query = _start(spark, tmp_path, "stored_consumer", {})
    try:
        later = put(t, (4, "b", "+I"))
        query.processAllAvailable()
        put(t, (5, "c", "+I"))  # Spark commits the batch before when it plans this one's
        query.processAllAvailable()
        rows = _seen(spark, "stored_consumer")
    finally:
        query.stop()
    # Before: the consumer was not read (snapshots after the latest) nor moved.
    assert [r[2] for r in rows] == [3, 4, 5]
    consumer = t.consumer_manager().consumer("etl")
    assert consumer is not None and consumer.next_snapshot > later


def test_a_full_start_waits_for_a_snapshot_id_not_committed_yet(spark: Any, catalog: Catalog,
                                                               tmp_path: Path) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    options = {"scan.mode": "from-snapshot-full", "scan.snapshot-id": "3"}
    python = _PythonStream(t.copy(options))
    query = _start(spark, tmp_path, "waits", options)
    try:
        python.drain()
        put(t, (2, "b", "+I"))
        query.processAllAvailable()
        put(t, (1, "a2", "+U"))  # snapshot 3: read in full
        query.processAllAvailable()
        put(t, (3, "c", "+I"))
        query.processAllAvailable()
        rows = _seen(spark, "waits")
    finally:
        query.stop()
    python.drain()
    assert query.exception() is None
    assert rows == sorted(python.rows) == [(3, "+I", 1, "a2"), (3, "+I", 2, "b"), (4, "+I", 3, "c")]


def test_an_empty_table_is_read_in_full_from_its_first_snapshot(spark: Any, catalog: Catalog,
                                                                tmp_path: Path) -> None:
    t = keyed_table(catalog)
    python = _PythonStream(t)
    query = _start(spark, tmp_path, "empty_at_start", {})
    try:
        python.drain()
        put(t, (1, "a", "+I"), (2, "b", "+I"))
        query.processAllAvailable()
        python.drain()
        put(t, (1, None, "-D"))
        query.processAllAvailable()
        rows = _seen(spark, "empty_at_start")
    finally:
        query.stop()
    python.drain()
    assert rows == sorted(python.rows) == [(1, "+I", 1, "a"), (1, "+I", 2, "b"), (2, "-D", 1, None)]


def _refusal(spark: Any, tmp_path: Path, options: dict[str, str]) -> str:
    register_changes_source(spark)
    reader = spark.readStream.format("lakehouse-changes").option("warehouse", str(tmp_path / "warehouse"))
    for key, value in options.items():
        reader = reader.option(key, value)
    try:
        query = (reader.load("db.t").writeStream.format("memory").queryName("refused")
                 .option("checkpointLocation", str(tmp_path / "refused")).trigger(availableNow=True).start())
        query.awaitTermination(120)
    except Exception as exc:  # at start or as the query's failure, as Spark reports it
        return str(exc)
    raise AssertionError(f"the query with {options} was not refused")


@pytest.mark.parametrize("options", [
    {"scan.mode": "latest", "scan.snapshot-id": "1"},
    {"scan.snapshot-id": "1", "scan.timestamp-millis": "1"},
    {"scan.mode": "from-snapshot", "scan.tag-name": "t"},
    {"scan.mode": "incremental", "incremental-between": "1,2"},
])
def test_start_options_the_python_stream_refuses_are_refused(spark: Any, catalog: Catalog, tmp_path: Path,
                                                              options: dict[str, str]) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    t.create_tag("t", 1)
    with pytest.raises(Exception) as python:
        scan = t.copy(options).new_stream_read_builder().new_streaming_scan()
        scan.plan()
    message = _refusal(spark, tmp_path, options)
    assert str(python.value) in message


def test_start_snapshot_with_a_scan_option_is_refused_naming_both(spark: Any, catalog: Catalog,
                                                                  tmp_path: Path) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    message = _refusal(spark, tmp_path, {"start-snapshot": "0", "scan.mode": "latest"})
    assert "option 'start-snapshot' and 'scan.mode' both say where the stream starts" in message


def test_a_full_start_records_its_consumer_when_spark_commits_the_full_read(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog)
    first = put(t, (1, "a", "+I"), (2, "b", "+I"))
    query = _start(spark, tmp_path, "full_consumer", {"consumer-id": "etl"})
    try:
        # Recorded at snapshot 1 now, a restart would read snapshot 1's changes, not the table.
        assert t.consumer_manager().consumer("etl") is None
        second = put(t, (3, "c", "+I"))
        query.processAllAvailable()  # the batch of snapshot 2 is planned: the full read is committed
        third = put(t, (4, "d", "+I"))
        query.processAllAvailable()
        rows = _seen(spark, "full_consumer")
    finally:
        query.stop()
    assert rows == [(first, "+I", 1, "a"), (first, "+I", 2, "b"), (second, "+I", 3, "c"), (third, "+I", 4, "d")]
    consumer = t.consumer_manager().consumer("etl")
    assert consumer is not None and consumer.next_snapshot == third
    # A new query with the consumer reads on from it: its changes, no full read.
    again = _start(spark, tmp_path, "full_consumer_again", {"consumer-id": "etl"})
    again.stop()
    assert _seen(spark, "full_consumer_again") == [(third, "+I", 4, "d")]
