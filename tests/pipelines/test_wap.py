"""Write-audit-publish on shop.orders and the changelog-fed daily_revenue table, through
`materialize` on the shared Spark session: a failing audit leaves main alone and keeps its branch,
a passing one publishes, a commit on main between write and publish is not lost (the batch is
rebased onto it, or, when the rebase is refused, written again by the next run), and the revenue
table follows the orders' updates and deletes incrementally."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from lakehouse_engine import CommitConflictError, FileStoreTable
from pipelines.defs.downstream.assets import CONSUMER_ID, daily_revenue, revenue_table_name
from pipelines.defs.downstream.publish import daily_revenue_publish
from pipelines.defs.ingestion.assets import ingested_events
from pipelines.defs.lsm import checks as lsm_checks
from pipelines.defs.lsm import publish as publish_module
from pipelines.defs.lsm.assets import bucket_assignment, lsm_write
from pipelines.defs.lsm.publish import lsm_publish
from pipelines.defs.maintenance.assets import ExpiryConfig, snapshot_expiry
from pipelines.lib import revenue, wap
from pipelines.lib.bucket_report import bucket_rows
from pipelines.lib.ledger import Ledger
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.sample_data import PRIMARY_KEY, apply_to_model, generate_order_events
from pipelines.scripts.run_main import write_landing
from tests.pipelines.conftest import ASSET_CHECKS, DAYS, check_results, metadata_of

pytestmark = pytest.mark.spark

ASSETS = [ingested_events, bucket_assignment, lsm_write, lsm_publish, daily_revenue, daily_revenue_publish,
          snapshot_expiry]
WRITE = dg.AssetSelection.assets(ingested_events, bucket_assignment, lsm_write, lsm_publish, daily_revenue,
                                 daily_revenue_publish)
RANGE = {"dagster/asset_partition_range_start": DAYS[0], "dagster/asset_partition_range_end": DAYS[-1]}


class Run:
    """One warehouse, its landing batches, and materialize over the write-audit-publish assets."""

    def __init__(self, tmp_path: Path, spark: LakehouseSparkResource):
        self.lakehouse = LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2)
        self.resources: dict[str, Any] = {"spark": spark, "lakehouse": self.lakehouse}
        self.instance = dg.DagsterInstance.ephemeral()
        self.batches = generate_order_events(days=len(DAYS), rows_per_day=300, seed=11,
                                             start=datetime.date.fromisoformat(DAYS[0]))
        self.landed = 0

    def land(self, n: int) -> None:
        """Put the next `n` batches in the landing area (each run then ingests them)."""
        chosen = self.batches[self.landed:self.landed + n]
        tmp = self.lakehouse.landing_path.parent / f"landing-{self.landed}"
        write_landing(tmp, chosen)
        for path in tmp.rglob("*.*"):
            target = self.lakehouse.landing_path / path.parent.name / f"r{self.landed}-{path.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        self.landed += n

    def materialize(self, selection: Any = WRITE, **kwargs: Any) -> Any:
        return dg.materialize([*ASSETS, *ASSET_CHECKS], selection=selection, resources=self.resources,
                              instance=self.instance, tags=RANGE, raise_on_error=False, **kwargs)

    def main_rows(self) -> pa.Table:
        return revenue.read_all(self.lakehouse.get_table())

    def equals_model(self) -> bool:
        expected = apply_to_model(self.batches[:self.landed])
        got = self.main_rows().select(expected.column_names).sort_by([(k, "ascending") for k in PRIMARY_KEY])
        return got.cast(expected.schema).equals(expected)

    def main_snapshot(self) -> int:
        latest = self.lakehouse.get_table().latest_snapshot()
        return latest.id if latest else 0


@pytest.fixture
def run(tmp_path: Path, spark_resource: LakehouseSparkResource) -> Run:
    return Run(tmp_path, spark_resource)


def test_a_passing_run_publishes_and_leaves_no_branch(run: Run) -> None:
    run.land(3)
    result = run.materialize()
    assert result.success
    published = metadata_of(result, "lsm_publish")
    write = metadata_of(result, "lsm_write")
    assert published["published"] is True and published["audit_branch"] == write["audit_branch"]
    assert (published["main_snapshot_before"], write["branch_base_snapshot"]) == (0, 0)
    assert run.main_snapshot() == published["main_snapshot_id"] >= 1
    assert all(check_results(result)[k].passed for k in check_results(result))
    assert "lsm_write:contract_keys_on_branch" in check_results(result)
    table = run.lakehouse.get_table()
    assert wap.audit_branches(table) == [] and table.list_tags() == []
    assert run.equals_model()
    assert Ledger(run.lakehouse.ledger_path).read().pending(DAYS) == []


def test_a_failing_check_leaves_main_untouched_and_keeps_the_branch(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    run.land(2)
    assert run.materialize().success
    before = run.main_snapshot()
    run.land(2)
    # The audit finds a staged key missing from the branch (one more key staged than written).
    real = lsm_checks.keys_staged_in_run
    monkeypatch.setattr(lsm_checks, "keys_staged_in_run", lambda context: (real(context) or 0) + 1)
    failed = run.materialize()
    monkeypatch.setattr(lsm_checks, "keys_staged_in_run", real)
    assert not failed.success
    verdict = check_results(failed)["lsm_write:contract_keys_on_branch"]
    assert not verdict.passed and "were staged" in (verdict.description or "")
    materialized = {e.asset_key.to_user_string() for e in failed.get_asset_materialization_events()}
    assert "lsm_write" in materialized and "lsm_publish" not in materialized
    table = run.lakehouse.get_table()
    assert run.main_snapshot() == before                      # no reader saw the batch
    branch = metadata_of(failed, "lsm_write")["audit_branch"]
    assert wap.audit_branches(table) == [branch]              # kept for inspection
    assert table.branch_table(branch).latest_snapshot().id > before
    assert Ledger(run.lakehouse.ledger_path).read().pending(DAYS)   # nothing lost: rows still pending

    # Expiry and orphan removal on main keep the open branch's files.
    expiry = ExpiryConfig(retain_max=1, retain_min=1, orphan_older_than_hours=0.0)
    assert run.materialize(dg.AssetSelection.assets(snapshot_expiry),
                           run_config=dg.RunConfig({"snapshot_expiry": expiry})).success
    assert revenue.read_all(run.lakehouse.get_table().branch_table(branch)).num_rows > 0

    # The next run discards the failed audit and writes the rows again.
    again = run.materialize()
    assert again.success
    assert branch not in run.lakehouse.get_table().list_branches()
    assert run.equals_model()


def _compaction_before_publish(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make lsm_publish find main moved: a full compaction commits to main just before it publishes."""
    real_publish = wap.publish
    compactions: list[int] = []

    def compaction_then_publish(table: Any, branch: str, recheck: Any = None) -> Any:
        if str(table.identifier) == "shop.orders":             # not daily_revenue_publish's table
            compactions.extend(table.compact(full=True))      # another writer commits to main first
        return real_publish(table, branch, recheck)

    monkeypatch.setattr(publish_module.wap, "publish", compaction_then_publish)
    return compactions


def _two_sorted_runs_on_main(run: Run) -> None:
    """Two runs of the first day's rows: lsm_write takes each run's level 0 up into a sorted run of
    its own, so main's buckets hold two and the full compaction of the race has work to commit."""
    for _ in range(2):
        run.land(1)
        assert run.materialize().success
    assert max(r.sorted_runs for r in bucket_rows(run.lakehouse.get_table())) == 2


def test_a_commit_on_main_between_write_and_publish_is_not_lost(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    _two_sorted_runs_on_main(run)
    run.land(2)
    compactions = _compaction_before_publish(monkeypatch)
    raced = run.materialize()
    assert raced.success and compactions
    published, write = metadata_of(raced, "lsm_publish"), metadata_of(raced, "lsm_write")
    # Rebased: the batch written again on the compaction, checked there, then published.
    assert published["rebased"] is True and published["audit_branch"] == write["audit_branch"]
    assert f"{compactions[-1]} COMPACT" in published["main_commits_kept"]
    assert published["published_branch"] == f"{write['audit_branch']}-onto-{compactions[-1]}"
    assert published["main_snapshot_before"] == compactions[-1]
    table = run.lakehouse.get_table()
    assert table.snapshot(compactions[-1]).commit_kind == "COMPACT"   # main's commit stays in its history
    assert run.main_snapshot() == published["main_snapshot_id"] > compactions[-1]
    # The batch landed once: one APPEND on main after the compaction.
    assert [s.commit_kind for s in table.snapshots() if s.id > compactions[-1]].count("APPEND") == 1
    assert run.equals_model() and wap.audit_branches(table) == []
    assert table.list_tags() == []
    assert Ledger(run.lakehouse.ledger_path).read().pending(DAYS) == []
    # daily_revenue read the rebased batch's changelog, computed against the compacted main.
    assert _revenue_equals_recompute(run)
    assert check_results(raced)["daily_revenue:revenue_equals_full_recompute"].passed


def test_when_the_rebase_is_refused_main_is_untouched_and_the_next_run_publishes(
        run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    _two_sorted_runs_on_main(run)
    run.land(2)
    compactions = _compaction_before_publish(monkeypatch)

    def refuse(self: Any, source_branch: str, after: int) -> list[int]:
        raise CommitConflictError(f"file x of branch {source_branch} was written with schema 1 but ...")

    monkeypatch.setattr(FileStoreTable, "rebase_appends", refuse)
    raced = run.materialize()
    monkeypatch.undo()
    assert not raced.success and compactions
    failure = next(e for e in raced.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "cannot be rebased" in str(failure.event_specific_data.error.message)
    table = run.lakehouse.get_table()
    assert run.main_snapshot() == compactions[-1]             # the compaction is main's latest
    assert len(wap.audit_branches(table)) == 1                # the audited branch, kept; no rebased one
    assert Ledger(run.lakehouse.ledger_path).read().pending(DAYS)
    again = run.materialize()
    assert again.success
    table = run.lakehouse.get_table()
    assert table.snapshot(compactions[-1]).commit_kind == "COMPACT"   # still in main's history
    assert run.main_snapshot() > compactions[-1]
    assert run.equals_model() and wap.audit_branches(table) == []


def _revenue_equals_recompute(run: Run) -> bool:
    target = run.lakehouse.catalog().get_table(revenue_table_name(run.lakehouse))
    return revenue.live_groups(revenue.read_all(target)).equals(revenue.full_aggregate(run.main_rows()))


def test_daily_revenue_follows_updates_and_deletes_reading_only_new_snapshots(run: Run) -> None:
    run.land(2)
    first = run.materialize()
    assert first.success
    meta = metadata_of(first, "daily_revenue")
    assert meta["mode"] == "full (first run)" and _revenue_equals_recompute(run)
    assert check_results(first)["daily_revenue:revenue_equals_full_recompute"].passed
    consumed = meta["consumer_next_snapshot"]
    orders = run.lakehouse.get_table()
    assert orders.consumer_manager().consumer(CONSUMER_ID).next_snapshot == consumed
    kinds: dict[str, int] = {}
    for _ in range(3):
        start = run.main_snapshot() + 1
        run.land(2)
        result = run.materialize()
        assert result.success
        meta = metadata_of(result, "daily_revenue")
        assert meta["mode"] == "incremental"
        assert meta["first_snapshot"] == consumed == start      # only the new snapshots
        assert meta["last_snapshot"] == run.main_snapshot()
        consumed = meta["consumer_next_snapshot"]
        for kind in ("insert", "update_before", "update_after", "delete"):
            kinds[kind] = kinds.get(kind, 0) + meta[f"changes_{kind}"]
        assert _revenue_equals_recompute(run)
        assert check_results(result)["daily_revenue:revenue_equals_full_recompute"].passed
    assert kinds["update_before"] > 0 and kinds["update_after"] > 0 and kinds["delete"] > 0
    idle = run.materialize(dg.AssetSelection.assets(daily_revenue, daily_revenue_publish))
    assert metadata_of(idle, "daily_revenue")["changes"] == 0
