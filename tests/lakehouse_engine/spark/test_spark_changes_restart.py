"""A Structured Streaming query of a table's changes restarted from its checkpoint after Spark
logged its first micro-batch's offsets but before that micro-batch finished: Spark asks the
source for its initial offset again and replays the micro-batch to the end offset it logged.
The replay reads what the first attempt read, from the start decided then: before, the start was
decided again, and a full first read was read at the snapshot latest at the restart (its rows
then came again as that snapshot's changes). Offsets of checkpoints written before the start was
recorded in the end offset read on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark.changes import (
    ChangesDataSource,
    changes_schema,
    register_changes_source,
)
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put

pytestmark = pytest.mark.spark

Row = tuple[int, str, int, Any]


def _query(spark: Any, tmp_path: Path, options: dict[str, str], batches: list[tuple[int, list[Row]]],
           fail_first: bool) -> Any:
    """A query into foreachBatch that keeps each micro-batch's rows, or fails its first."""
    register_changes_source(spark)
    reader = spark.readStream.format("lakehouse-changes").option("warehouse", str(tmp_path / "warehouse"))
    for key, value in options.items():
        reader = reader.option(key, value)

    def sink(df: Any, batch_id: int) -> None:
        rows = sorted(tuple(r) for r in df.select("_snapshot_id", "_row_kind", "id", "v").collect())
        if fail_first and batch_id == 0:
            raise RuntimeError("the first micro-batch fails")
        batches.append((batch_id, rows))

    return (reader.load("db.t").writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(processingTime="100 milliseconds").start())


def _fail_first_batch(spark: Any, tmp_path: Path, options: dict[str, str]) -> None:
    query = _query(spark, tmp_path, options, [], fail_first=True)
    with pytest.raises(Exception, match="the first micro-batch fails"):
        query.awaitTermination(120)
    # Spark logged the first micro-batch's offsets, and never committed it.
    assert (tmp_path / "ck" / "offsets" / "0").exists()
    assert not (tmp_path / "ck" / "commits" / "0").exists()


def _restart(spark: Any, tmp_path: Path, options: dict[str, str], then: Any = None) -> list[tuple[int, list[Row]]]:
    batches: list[tuple[int, list[Row]]] = []
    query = _query(spark, tmp_path, options, batches, fail_first=False)
    try:
        query.processAllAvailable()
        if then is not None:
            then()
            query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    return batches


def _rows(batches: list[tuple[int, list[Row]]]) -> list[Row]:
    return [row for _, rows in batches for row in rows]


@pytest.mark.parametrize("consumer", [False, True], ids=["no-consumer", "consumer"])
def test_a_restarted_full_start_reads_the_snapshot_its_first_attempt_read(
        spark: Any, catalog: Catalog, tmp_path: Path, consumer: bool) -> None:
    t = keyed_table(catalog)
    options = {"consumer-id": "etl"} if consumer else {}
    first = put(t, (1, "a", "+I"), (2, "b", "+I"))
    _fail_first_batch(spark, tmp_path, options)
    assert t.consumer_manager().consumer("etl") is None  # recorded when the full read is committed
    between = put(t, (3, "c", "+I"), (1, "a2", "+U"))
    batches = _restart(spark, tmp_path, options, lambda: put(t, (4, "d", "+I")))
    # Before: snapshot `between` was read in full (1 a2, 2 b, 3 c as +I), then its changes again.
    assert batches[0] == (0, [(first, "+I", 1, "a"), (first, "+I", 2, "b")])
    assert _rows(batches[1:]) == [(between, "+I", 3, "c"), (between, "+U", 1, "a2"),
                                  (between + 1, "+I", 4, "d")]
    if consumer:
        recorded = t.consumer_manager().consumer("etl")
        assert recorded is not None and recorded.next_snapshot == between + 1  # the batch of `between`


@pytest.mark.parametrize("consumer", [False, True], ids=["no-consumer", "consumer"])
def test_a_restarted_latest_start_skips_nothing_committed_after_it(
        spark: Any, catalog: Catalog, tmp_path: Path, consumer: bool) -> None:
    t = keyed_table(catalog)
    options = {"scan.mode": "latest", **({"consumer-id": "etl"} if consumer else {})}
    put(t, (1, "a", "+I"))
    _fail_first_batch(spark, tmp_path, options)
    if consumer:
        recorded = t.consumer_manager().consumer("etl")
        assert recorded is not None and recorded.next_snapshot == 2  # recorded when the query started
    between = put(t, (2, "b", "+I"))
    batches = _restart(spark, tmp_path, options, lambda: put(t, (3, "c", "+I")))
    assert batches[0] == (0, [])  # the replayed first micro-batch: from the start to the latest then
    assert _rows(batches) == [(between, "+I", 2, "b"), (between + 1, "+I", 3, "c")]


def _reader(tmp_path: Path, catalog: Catalog, **options: str) -> Any:
    source = ChangesDataSource({"warehouse": str(tmp_path / "warehouse"), "path": "db.t", **options})
    return source.streamReader(changes_schema(catalog.get_table("db.t")))


def _json(offset: dict) -> dict:
    return json.loads(json.dumps(offset))  # as Spark keeps it in its offset log


def _snapshots(reader: Any, start: dict, end: dict) -> list[int]:
    """The snapshots the micro-batch from `start` to `end` reads (in full or their changes)."""
    return sorted({p.value.snapshot_id for p in reader.partitions(_json(start), _json(end))})


def test_the_initial_offset_is_always_the_same_and_the_start_is_decided_with_the_first_end_offset(
        catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog)
    first = put(t, (1, "a", "+I"))
    reader = _reader(tmp_path, catalog, **{"scan.mode": "latest"})
    initial = reader.initialOffset()
    end = _json(reader.latestOffset(initial, None))
    later = put(t, (2, "b", "+I"))
    # Spark asks for the initial offset again when it runs the micro-batch (and on a restart).
    assert reader.initialOffset() == initial == _reader(tmp_path, catalog).initialOffset()
    assert end["start"] == {"next_snapshot": first + 1}
    assert _snapshots(_reader(tmp_path, catalog, **{"scan.mode": "latest"}), initial, end) == []
    following = reader.latestOffset(end, None)
    assert _snapshots(reader, end, following) == [later]
    assert reader.latestOffset(following, None) == following  # nothing new: the same offset


def test_a_consumer_at_the_latest_snapshot_decides_an_end_offset_spark_can_log(
        catalog: Catalog, tmp_path: Path) -> None:
    from lakehouse_engine.store.consumer_manager import Consumer

    t = keyed_table(catalog)
    latest = put(t, (1, "a", "+I"))
    t.consumer_manager().reset_consumer("etl", Consumer(latest + 1, t.snapshot(latest).time_millis))
    reader = _reader(tmp_path, catalog, **{"consumer-id": "etl"})
    end = _json(reader.latestOffset(reader.initialOffset(), None))  # was a dict holding itself
    assert end["start"] == {"next_snapshot": latest + 1, "snapshot_millis": t.snapshot(latest).time_millis}
    assert _snapshots(reader, reader.initialOffset(), end) == []


def test_offsets_of_checkpoints_written_before_read_on(catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog, **{"consumer-id": "etl"})
    first = put(t, (1, "a", "+I"), (2, "b", "+I"))
    second = put(t, (3, "c", "+I"))
    reader = _reader(tmp_path, catalog)
    full = {"next_snapshot": first, "scan_snapshot": True}
    # The first micro-batch of such a checkpoint ended at the start: it reads nothing.
    assert _snapshots(reader, {"next_snapshot": 0}, full) == []
    assert _snapshots(reader, {"next_snapshot": 0}, {"next_snapshot": second}) == []
    # A start read in full, then the changes after it.
    end = reader.latestOffset(_json(full), None)
    assert end["next_snapshot"] == second + 1 and "start" not in end
    assert _snapshots(reader, full, end) == [first, second]
    reader.commit(_json(full))
    assert t.consumer_manager().consumer("etl") is None  # nothing read yet
    reader.commit(_json(end))
    assert t.consumer_manager().consumers() == {"etl": second + 1}
    # A changes start.
    assert _snapshots(reader, {"next_snapshot": second}, end) == [second]
    assert _snapshots(reader, {"next_snapshot": first}, end) == [first, second]
