"""The LSM write and its publish, rerun after the run died between publishing the commit and the
ledger update, or after the commit raised PostCommitError, do not commit the staged rows a second time."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from lakehouse_engine.errors import PostCommitError
from pipelines.defs.ingestion.assets import ingested_events
from pipelines.defs.lsm.assets import bucket_assignment, lsm_write
from pipelines.defs.lsm.publish import lsm_publish
from pipelines.lib.ledger import Ledger, LedgerState
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.sample_data import generate_order_events
from pipelines.scripts.run_main import write_landing
from tests.pipelines.conftest import DAY, metadata_of

pytestmark = pytest.mark.spark



def _run(lakehouse: LakehouseResource, spark: LakehouseSparkResource, *assets: Any) -> Any:
    return dg.materialize(list(assets), selection=list(assets), partition_key=DAY, raise_on_error=False,
                          resources={"spark": spark, "lakehouse": lakehouse})


def _staged(tmp_path: Path, spark: LakehouseSparkResource) -> LakehouseResource:
    lakehouse = LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2)
    write_landing(lakehouse.landing_path, generate_order_events(
        days=1, rows_per_day=300, seed=11, start=datetime.date.fromisoformat(DAY)))
    assert _run(lakehouse, spark, ingested_events, bucket_assignment).success
    return lakehouse


def test_a_run_that_died_after_its_commit_is_not_committed_again(
        tmp_path: Path, spark_resource: LakehouseSparkResource, monkeypatch: pytest.MonkeyPatch) -> None:
    lakehouse = _staged(tmp_path, spark_resource)
    real = LedgerState.mark_written

    def die(self: LedgerState, *args: Any) -> list[str]:
        raise RuntimeError("the run died after the commit, before the ledger recorded it")

    monkeypatch.setattr(LedgerState, "mark_written", die)
    assert not _run(lakehouse, spark_resource, lsm_write, lsm_publish).success
    monkeypatch.setattr(LedgerState, "mark_written", real)
    table = lakehouse.get_table()
    committed = table.latest_snapshot()  # published: the write-only APPEND, then its level 0 taken up
    assert committed is not None and committed.commit_kind == "COMPACT"
    written = table.snapshot(committed.id - 1)
    assert written.commit_kind == "APPEND" and written.commit_user.startswith("lsm_write-")
    rerun = _run(lakehouse, spark_resource, lsm_write, lsm_publish)
    assert rerun.success
    latest = lakehouse.get_table().latest_snapshot()
    assert latest.id == committed.id and latest.total_record_count == committed.total_record_count
    assert metadata_of(rerun, "lsm_write")["snapshot_id"] == committed.id
    assert Ledger(lakehouse.ledger_path).read().pending([DAY]) == []


def test_a_post_commit_error_records_the_rows_as_committed(
        tmp_path: Path, spark_resource: LakehouseSparkResource, monkeypatch: pytest.MonkeyPatch) -> None:
    lakehouse = _staged(tmp_path, spark_resource)
    import lakehouse_engine.spark as lakehouse_spark

    real = lakehouse_spark.write

    def compaction_fails(*args: Any, **kwargs: Any) -> list[int]:
        ids = real(*args, **kwargs)
        raise PostCommitError("the data is committed, then its compaction failed", ids[:1])

    monkeypatch.setattr(lakehouse_spark, "write", compaction_fails)
    first = _run(lakehouse, spark_resource, lsm_write, lsm_publish)
    assert first.success
    committed = lakehouse.get_table().latest_snapshot()
    assert Ledger(lakehouse.ledger_path).read().pending([DAY]) == []
    monkeypatch.setattr(lakehouse_spark, "write", real)
    again = _run(lakehouse, spark_resource, lsm_write, lsm_publish)
    assert again.success and metadata_of(again, "lsm_write")["rows_written"] == 0
    assert lakehouse.get_table().latest_snapshot().id == committed.id
