"""A Spark write retried after its driver commit failed, or after it landed unacknowledged, with the
same commit user applies its rows once (an aggregation table would show a double apply)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakehouse_engine.spark as spark_write
from lakehouse_engine import Catalog
from lakehouse_engine.errors import PostCommitError
from lakehouse_engine.format.snapshot import CommitKind
from lakehouse_engine.write.table_commit import TableCommit
from tests.lakehouse_engine.conftest import create_table, read

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
# Trigger 1: a bucket of two sorted runs compacts whatever their sizes (Paimon's universal picker
# compacts on a run count above the trigger; with 2 it would depend on the files' size ratio).
SUM = {"bucket": "2", "merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
       "num-sorted-run.compaction-trigger": "1"}


def _sums(table: Any) -> dict[int, int]:
    return {r["id"]: r["v"] for r in read(table).to_pylist()}


def _df(spark: Any, ids: range, v: int) -> Any:
    return spark.createDataFrame(pa.table({"id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA).to_pandas())


def test_a_rerun_with_the_same_commit_user_after_a_post_commit_error_applies_once(
        spark: Any, catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = create_table(catalog, "sums", SCHEMA, primary_keys=["id"], options=SUM)
    for v in (1, 2):  # level-0 runs, so the next write's tasks compact and the commit has a COMPACT part
        spark_write.write(_df(spark, range(20), v), table)
    assert _sums(table) == {i: 3 for i in range(20)}
    real = TableCommit._try_commit

    def full_disk_at_compaction(self: TableCommit, planner: Any, identifier: int) -> int | None:
        if planner.kind is CommitKind.COMPACT:
            raise OSError(errno.ENOSPC, "No space left on device", "manifest")
        return real(self, planner, identifier)

    monkeypatch.setattr(TableCommit, "_try_commit", full_disk_at_compaction)
    with pytest.raises(PostCommitError) as err:
        spark_write.write(_df(spark, range(20), 10), table, commit_user="daily-load-2026-11-23")
    landed = err.value.snapshot_ids
    assert landed == [table.latest_snapshot().id]
    monkeypatch.undo()
    # The job is rerun as a whole (new tasks, new files): the commit user tells it landed.
    again = spark_write.write(_df(spark, range(20), 10), table, commit_user="daily-load-2026-11-23")
    assert again == landed
    assert table.latest_snapshot().id == landed[0]
    assert _sums(table) == {i: 13 for i in range(20)}
    # A new commit user is a new write.
    spark_write.write(_df(spark, range(20), 10), table, commit_user="daily-load-2026-11-24")
    assert _sums(table) == {i: 23 for i in range(20)}


def test_the_driver_commit_of_task_messages_needs_no_search_for_its_files(
        spark: Any, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tasks write under the driver's commit user: the commit recognises them as its own and
    does not look through snapshots for their files (the normal path stays free)."""
    table = create_table(catalog, "sums", SCHEMA, primary_keys=["id"], options=SUM)
    spark_write.write(_df(spark, range(20), 1), table)
    searched: list[int] = []
    import lakehouse_engine.write.commit_retry as retry

    real = retry.snapshot_adding
    monkeypatch.setattr(retry, "snapshot_adding", lambda *a: searched.append(1) or real(*a))
    spark_write.write(_df(spark, range(20), 1), table)
    assert searched == []
    assert _sums(table) == {i: 2 for i in range(20)}
