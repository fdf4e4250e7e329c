"""A Dagster re-execution "from failure" of a failed `daily_revenue` run runs only the failed steps
(the check, the publish) in a new run: it must audit and publish the audit branch the failed run's
`daily_revenue` wrote, exactly once, as the failed run should have."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from lakehouse_engine.store.consumer_manager import ConsumerManager
from pipelines.defs.downstream import checks as checks_module
from pipelines.defs.downstream.assets import CONSUMER_ID, daily_revenue, revenue_table_name
from pipelines.defs.downstream.checks import revenue_equals_full_recompute
from pipelines.defs.downstream.publish import daily_revenue_publish
from pipelines.lib import revenue, wap
from pipelines.lib.resources import LakehouseResource
from pipelines.lib.runs import PARENT_RUN_TAG, ROOT_RUN_TAG, run_is_running
from tests.pipelines.conftest import engine_write, three_batches


def revenue_job(warehouse: str) -> dg.JobDefinition:
    """daily_revenue, its check and its publish as one in-process job (rebuilt by Dagster from
    this module for each run)."""
    defs = dg.Definitions(
        assets=[daily_revenue, daily_revenue_publish], asset_checks=[revenue_equals_full_recompute],
        jobs=[dg.define_asset_job("revenue", selection=[daily_revenue.key, daily_revenue_publish.key],
                                  executor_def=dg.in_process_executor)],
        resources={"lakehouse": LakehouseResource(warehouse=warehouse, bucket=2)})
    return defs.resolve_job_def("revenue")


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


class Runs:
    def __init__(self, lakehouse: LakehouseResource, instance: dg.DagsterInstance):
        self.lakehouse, self.instance = lakehouse, instance
        self.job = dg.build_reconstructable_job(__name__, "revenue_job",
                                                reconstructable_kwargs={"warehouse": lakehouse.warehouse})

    def run(self) -> Any:
        return dg.execute_job(self.job, instance=self.instance, raise_on_error=False)

    def from_failure(self, failed: Any) -> Any:
        options = dg.ReexecutionOptions.from_failure(failed.run_id, self.instance)
        return dg.execute_job(self.job, instance=self.instance, reexecution_options=options, raise_on_error=False)

    def consumer(self) -> int:
        consumer = self.lakehouse.get_table().consumer_manager().consumer(CONSUMER_ID)
        return consumer.next_snapshot if consumer is not None else 0

    def equals_recompute(self) -> bool:
        target = self.lakehouse.catalog().get_table(revenue_table_name(self.lakehouse))
        orders = revenue.read_all(self.lakehouse.get_table())
        return revenue.live_groups(revenue.read_all(target)).equals(revenue.full_aggregate(orders))


@pytest.fixture
def runs(tmp_path: Path, instance: dg.DagsterInstance) -> Runs:
    return Runs(LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2), instance)


def _published(result: Any, entered: bool = False) -> dict[str, Any]:
    """The publish step's materialization metadata in a run (`entered`: the result was opened)."""
    if not entered:
        with result:
            return _published(result, entered=True)
    return {k: getattr(v, "value", v) for event in result.get_asset_materialization_events()
            for mat in [event.step_materialization_data.materialization]
            if mat.asset_key == daily_revenue_publish.key for k, v in mat.metadata.items()}


def test_a_publish_that_failed_is_published_by_the_re_execution_from_failure(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, _ = three_batches()
    engine_write(runs.lakehouse, a)
    assert runs.run().success
    engine_write(runs.lakehouse, b)
    before = runs.consumer()
    real = wap.publish

    def flaky(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the object store timed out")

    monkeypatch.setattr(wap, "publish", flaky)
    failed = runs.run()
    monkeypatch.setattr(wap, "publish", real)
    assert not failed.success and runs.consumer() == before and not runs.equals_recompute()
    again = runs.from_failure(failed)
    # Before: the re-execution found no daily_revenue in its own run and published nothing.
    assert again.success
    published = _published(again)
    assert published["published"] is True and published["consumer_before"] == before
    assert runs.consumer() > before and runs.equals_recompute()
    target = runs.lakehouse.catalog().get_table(revenue_table_name(runs.lakehouse))
    assert wap.audit_branches(target) == []
    # Once: the next normal run has nothing new to add.
    assert runs.run().success and runs.equals_recompute()


def test_an_audit_that_errored_is_audited_and_published_by_the_re_execution_from_failure(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, _ = three_batches()
    engine_write(runs.lakehouse, a)
    assert runs.run().success
    engine_write(runs.lakehouse, b)
    before = runs.consumer()

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the object store timed out")

    with monkeypatch.context() as patch:
        patch.setattr(checks_module.revenue, "compare_with_recompute", unreadable)
        failed = runs.run()
    assert not failed.success and runs.consumer() == before
    again = runs.from_failure(failed)
    assert again.success
    with again:
        evaluations = again.get_asset_check_evaluations()
        published = _published(again, entered=True)
    # The re-run check judged the failed run's branch (its orders snapshot), not main.
    assert [e.passed for e in evaluations] == [True]
    assert evaluations[0].metadata["branch"].value == wap.audit_branch_name(failed.run_id)
    assert published["published"] is True
    assert runs.consumer() > before and runs.equals_recompute()


def test_a_re_execution_after_the_publish_died_past_the_fast_forward_moves_only_the_consumer(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, _ = three_batches()
    engine_write(runs.lakehouse, a)
    assert runs.run().success
    engine_write(runs.lakehouse, b)
    before = runs.consumer()

    def crash(self: Any, consumer_id: str, next_snapshot: Any) -> None:
        raise RuntimeError("the process died")

    with monkeypatch.context() as patch:
        patch.setattr(ConsumerManager, "reset_consumer", crash)
        failed = runs.run()
    assert not failed.success and runs.consumer() == before and runs.equals_recompute()
    again = runs.from_failure(failed)
    assert again.success and _published(again)["note"] == "main held the sums already"
    assert runs.consumer() > before and runs.equals_recompute()  # not counted twice
    assert metadata_of_next_run(runs)["changes"] == 0


def metadata_of_next_run(runs: Runs) -> dict[str, Any]:
    result = runs.run()
    assert result.success
    with result:
        return {k: getattr(v, "value", v) for event in result.get_asset_materialization_events()
                for mat in [event.step_materialization_data.materialization]
                if mat.asset_key == daily_revenue.key for k, v in mat.metadata.items()}


def test_a_finished_run_whose_re_execution_is_in_progress_keeps_its_audit_branch(
        runs: Runs, instance: dg.DagsterInstance) -> None:
    # discard_finished (every daily_revenue run's first step) must not drop the failed run's
    # branch while its re-execution, which publishes that branch, has not finished.
    engine_write(runs.lakehouse, three_batches()[0])
    finished = runs.run()
    running = run_is_running(instance)
    assert not running(finished.run_id)
    job = revenue_job(runs.lakehouse.warehouse)
    child = instance.create_run_for_job(job_def=job, parent_run_id=finished.run_id, root_run_id=finished.run_id,
                                        tags={PARENT_RUN_TAG: finished.run_id, ROOT_RUN_TAG: finished.run_id})
    assert running(finished.run_id)
    instance.report_run_failed(child)
    assert not running(finished.run_id)
