"""Write-audit-publish on `shop.daily_revenue`, through `materialize`: `daily_revenue` writes into the
run's audit branch, `revenue_equals_full_recompute` reads the branch, `daily_revenue_publish`
fast-forwards main and only then moves the orders consumer. A failed audit leaves main and the
consumer where they were (no reader sees the wrong sums, the next run reads the same changes), a
commit on main between write and publish is kept, and a publish that died before moving the
consumer is not counted twice."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from lakehouse_engine.store.consumer_manager import ConsumerManager
from pipelines.defs.downstream import assets as downstream
from pipelines.defs.downstream import publish as publish_module
from pipelines.defs.downstream.assets import CONSUMER_ID, daily_revenue, revenue_table_name
from pipelines.defs.downstream.checks import revenue_equals_full_recompute
from pipelines.defs.downstream.publish import daily_revenue_publish
from pipelines.lib import revenue, wap
from pipelines.lib.resources import LakehouseResource
from tests.pipelines.conftest import check_results, engine_write, events, metadata_of

CHECK = "daily_revenue:revenue_equals_full_recompute"


class Downstream:
    """One warehouse, one Dagster instance, and runs of daily_revenue, its check and its publish."""

    def __init__(self, lakehouse: LakehouseResource):
        self.lakehouse = lakehouse
        self.instance = dg.DagsterInstance.ephemeral()
        rows = events(rows_per_day=160, seed=7)
        self.batches = [rows.slice(i * 40, 40) for i in range(4)]

    def run(self) -> Any:
        return dg.materialize([daily_revenue, revenue_equals_full_recompute, daily_revenue_publish],
                              resources={"lakehouse": self.lakehouse}, instance=self.instance, raise_on_error=False)

    def passing_run(self) -> Any:
        result = self.run()
        assert result.success and check_results(result)[CHECK].passed
        return result

    def target(self) -> Any:
        return self.lakehouse.catalog().get_table(revenue_table_name(self.lakehouse))

    def main_snapshot(self) -> int:
        latest = self.target().latest_snapshot()
        return latest.id if latest is not None else 0

    def consumer(self) -> int:
        consumer = self.lakehouse.get_table().consumer_manager().consumer(CONSUMER_ID)
        return consumer.next_snapshot if consumer is not None else 0

    def equals_recompute(self, table: Any = None) -> bool:
        got = revenue.read_all(table if table is not None else self.target())
        return revenue.live_groups(got).equals(revenue.full_aggregate(revenue.read_all(self.lakehouse.get_table())))


@pytest.fixture
def down(lakehouse: LakehouseResource) -> Downstream:
    return Downstream(lakehouse)


def _one_wrong_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    """daily_revenue's deltas gain 1.00 of revenue in their first group: a wrong sum on the branch."""
    real = revenue.deltas

    def wrong(changes: pa.Table) -> pa.Table:
        right = real(changes)
        extra = pa.table({"dt": right.column("dt").slice(0, 1), "status": right.column("status").slice(0, 1),
                          revenue.REVENUE: pa.array([Decimal("1.00")], revenue.REVENUE_TYPE),
                          revenue.ORDERS: pa.array([0], pa.int64())}, schema=revenue.REVENUE_SCHEMA)
        return pa.concat_tables([right, extra])

    monkeypatch.setattr(downstream.revenue, "deltas", wrong)


def test_a_passing_run_publishes_and_only_then_moves_the_consumer(down: Downstream) -> None:
    engine_write(down.lakehouse, down.batches[0])
    first = down.passing_run()
    write, published = metadata_of(first, "daily_revenue"), metadata_of(first, "daily_revenue_publish")
    assert write["mode"] == "full (first run)" and write["consumer_before"] == 0
    assert published["published"] is True and published["main_snapshot_before"] == 0
    assert down.main_snapshot() == published["main_snapshot_id"] == write["revenue_snapshot_id"] >= 1
    assert down.consumer() == write["consumer_next_snapshot"] == published["consumer_next_snapshot"]
    engine_write(down.lakehouse, down.batches[1])
    before, consumed = down.main_snapshot(), down.consumer()
    second = down.passing_run()
    write, published = metadata_of(second, "daily_revenue"), metadata_of(second, "daily_revenue_publish")
    assert write["mode"] == "incremental" and write["first_snapshot"] == write["consumer_before"] == consumed
    # The check read the run's branch while main still showed the previous run's sums.
    verdict = check_results(second)[CHECK].metadata
    assert verdict["branch"].value == write["audit_branch"] and verdict["main_snapshot_id"].value == before
    assert write["branch_base_snapshot"] == published["main_snapshot_before"] == before
    assert down.main_snapshot() == published["main_snapshot_id"] > before
    assert down.consumer() == write["consumer_next_snapshot"] > consumed
    target = down.target()
    assert wap.audit_branches(target) == [] and target.list_tags() == []
    assert down.equals_recompute()


def test_a_failing_check_leaves_main_and_the_consumer_so_the_retry_reads_the_same_changes(
        down: Downstream, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_write(down.lakehouse, down.batches[0])
    down.passing_run()
    verified, main_before, consumed = revenue.read_all(down.target()), down.main_snapshot(), down.consumer()
    engine_write(down.lakehouse, down.batches[1])
    _one_wrong_sum(monkeypatch)
    seen_by_readers: list[pa.Table] = []
    real_compare = revenue.compare_with_recompute

    def reader_of_main_during_the_check(table: Any, orders: Any, at: int) -> Any:
        seen_by_readers.append(revenue.read_all(down.target()))
        return real_compare(table, orders, at)

    monkeypatch.setattr(revenue, "compare_with_recompute", reader_of_main_during_the_check)
    failed = down.run()
    monkeypatch.undo()
    assert not failed.success
    verdict = check_results(failed)[CHECK]
    assert not verdict.passed and "1 (dt, status) groups differ" in (verdict.description or "")
    materialized = {e.asset_key.to_user_string() for e in failed.get_asset_materialization_events()}
    assert materialized == {"daily_revenue"}                  # daily_revenue_publish did not run
    # Before: the wrong sums were in main between the commit and the check, and the check had to
    # roll them back. Now main never holds them and the consumer never moved.
    assert seen_by_readers and all(seen.equals(verified) for seen in seen_by_readers)
    assert down.main_snapshot() == main_before and revenue.read_all(down.target()).equals(verified)
    assert down.consumer() == consumed
    branch = metadata_of(failed, "daily_revenue")["audit_branch"]
    target = down.target()
    assert wap.audit_branches(target) == [branch]             # kept for inspection, with the wrong sums
    assert not down.equals_recompute(target.branch_table(branch))

    retried = down.passing_run()
    write = metadata_of(retried, "daily_revenue")
    assert write["mode"] == "incremental"
    assert write["first_snapshot"] == metadata_of(failed, "daily_revenue")["first_snapshot"] == consumed
    assert metadata_of(retried, "daily_revenue_publish")["published"] is True
    assert down.equals_recompute() and down.consumer() == write["consumer_next_snapshot"] > consumed
    assert wap.audit_branches(down.target()) == []            # the failed run's branch discarded


def _compaction_before_publish(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make daily_revenue_publish find main moved: a full compaction of the revenue table commits
    to main just before it publishes."""
    real_publish = wap.publish
    compactions: list[int] = []

    def compaction_then_publish(table: Any, branch: str, recheck: Any = None) -> Any:
        compactions.extend(table.compact(full=True))          # another writer commits to main first
        return real_publish(table, branch, recheck)

    monkeypatch.setattr(publish_module.wap, "publish", compaction_then_publish)
    return compactions


def test_a_commit_on_main_between_write_and_publish_is_not_lost(
        down: Downstream, monkeypatch: pytest.MonkeyPatch) -> None:
    for batch in down.batches[:2]:
        engine_write(down.lakehouse, batch)
        down.passing_run()
    engine_write(down.lakehouse, down.batches[2])
    compactions = _compaction_before_publish(monkeypatch)
    raced = down.passing_run()
    monkeypatch.undo()
    published = metadata_of(raced, "daily_revenue_publish")
    assert compactions and published["rebased"] is True
    assert f"{compactions[-1]} COMPACT" in published["main_commits_kept"]
    assert published["main_snapshot_before"] == compactions[-1] < down.main_snapshot()
    target = down.target()
    assert target.snapshot(compactions[-1]).commit_kind == "COMPACT"   # still in main's history
    assert down.equals_recompute()                                     # the deltas counted once
    assert down.consumer() == published["consumer_next_snapshot"]
    assert wap.audit_branches(target) == []


def test_a_publish_that_died_before_moving_the_consumer_is_not_counted_twice(
        down: Downstream, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_write(down.lakehouse, down.batches[0])
    down.passing_run()
    engine_write(down.lakehouse, down.batches[1])
    consumed = down.consumer()

    def crash(self: Any, consumer_id: str, next_snapshot: Any) -> None:
        raise RuntimeError("the process died")

    monkeypatch.setattr(ConsumerManager, "reset_consumer", crash)
    died = down.run()
    monkeypatch.undo()
    assert not died.success and down.consumer() == consumed   # main holds the sums, the consumer is behind
    assert down.equals_recompute()
    again = down.passing_run()
    assert metadata_of(again, "daily_revenue")["changes"] == 0 # went on from main's last commit
    assert down.equals_recompute() and down.consumer() > consumed


def test_a_consumer_moved_by_another_run_meanwhile_fails_the_publish_and_leaves_main(
        down: Downstream, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_write(down.lakehouse, down.batches[0])
    down.passing_run()
    engine_write(down.lakehouse, down.batches[1])
    main_before = down.main_snapshot()
    real = publish_module.consumed_in_run

    def another_run_published_first(instance: Any, run_id: str) -> Any:
        consumed = real(instance, run_id)
        down.lakehouse.get_table().consumer_manager().reset_consumer(CONSUMER_ID, consumed.after)
        return consumed

    monkeypatch.setattr(publish_module, "consumed_in_run", another_run_published_first)
    raced = down.run()
    monkeypatch.undo()
    assert not raced.success
    failure = next(e for e in raced.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "another run published them" in str(failure.event_specific_data.error.message)
    assert down.main_snapshot() == main_before


def test_a_recompute_is_not_rebased_when_main_moved_and_the_next_run_recomputes_again(
        down: Downstream, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_write(down.lakehouse, down.batches[0])
    kept = down.lakehouse.get_table().latest_snapshot().id
    down.passing_run()
    engine_write(down.lakehouse, down.batches[1])
    down.passing_run()
    down.lakehouse.get_table().rollback_to(kept)              # the next run recomputes (an OVERWRITE)
    consumed = down.consumer()
    compactions = _compaction_before_publish(monkeypatch)
    raced = down.run()
    monkeypatch.undo()
    assert not raced.success and compactions
    assert str(metadata_of(raced, "daily_revenue")["mode"]).startswith("full (recomputed")
    failure = next(e for e in raced.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "cannot be rebased" in str(failure.event_specific_data.error.message)
    assert down.main_snapshot() == compactions[-1] and down.consumer() == consumed
    again = down.passing_run()
    assert str(metadata_of(again, "daily_revenue")["mode"]).startswith("full (recomputed")
    assert down.equals_recompute() and wap.audit_branches(down.target()) == []


def test_the_check_on_its_own_reads_main_and_only_reports(down: Downstream) -> None:
    engine_write(down.lakehouse, down.batches[0])
    down.passing_run()

    def check_alone() -> Any:
        return dg.materialize([daily_revenue, revenue_equals_full_recompute, daily_revenue_publish],
                              selection=dg.AssetSelection.checks(revenue_equals_full_recompute),
                              resources={"lakehouse": down.lakehouse}, instance=down.instance, raise_on_error=False)

    verdict = check_results(check_alone())[CHECK]
    assert verdict.passed and verdict.metadata["branch"].value == "main"
    # Another writer adds to a sum on main: the check says so, and rolls nothing back (that
    # writer's commit is not the pipeline's to drop).
    target = down.target()
    extra = revenue.live_groups(revenue.read_all(target)).slice(0, 1)
    builder = target.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(extra)
    commit.commit(write.prepare_commit())
    moved = down.main_snapshot()
    verdict = check_results(check_alone())[CHECK]
    assert not verdict.passed and "1 (dt, status) groups differ" in (verdict.description or "")
    assert down.main_snapshot() == moved
