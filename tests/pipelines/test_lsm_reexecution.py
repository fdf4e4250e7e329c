"""A Dagster re-execution "from failure" of a failed `lsm_publish` runs only the failed step in a
new run: it must publish the audit branch of `shop.orders` the failed run's `lsm_write` wrote,
exactly once, as the failed run should have (a publish that died past the fast-forward only
finishes what is left; a branch discarded meanwhile fails the step, nothing changes)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from pipelines.defs.ingestion.assets import ingested_events
from pipelines.defs.lsm.assets import bucket_assignment, lsm_write
from pipelines.defs.lsm.checks import contract_keys_on_branch, lsm_write_row_counts
from pipelines.defs.lsm.publish import lsm_publish
from pipelines.lib import revenue, wap
from pipelines.lib.ledger import Ledger, LedgerState
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.sample_data import PRIMARY_KEY, apply_to_model, generate_order_events
from pipelines.scripts.run_main import write_landing
from tests.pipelines.conftest import DAY, SPARK_MASTER

pytestmark = pytest.mark.spark

ROWS = 300


def lsm_job(warehouse: str) -> dg.JobDefinition:
    """lsm_write, its engine-read blocking checks and lsm_publish as one in-process job (rebuilt by
    Dagster from this module for each run)."""
    defs = dg.Definitions(
        assets=[lsm_write, lsm_publish], asset_checks=[lsm_write_row_counts, contract_keys_on_branch],
        jobs=[dg.define_asset_job("lsm", selection=[lsm_write.key, lsm_publish.key],
                                  executor_def=dg.in_process_executor)],
        resources={"lakehouse": LakehouseResource(warehouse=warehouse, bucket=2),
                   "spark": LakehouseSparkResource(master=SPARK_MASTER, shuffle_partitions=2,
                                                   stop_on_teardown=False)})
    return defs.resolve_job_def("lsm")


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


class Runs:
    def __init__(self, lakehouse: LakehouseResource, instance: dg.DagsterInstance, spark: LakehouseSparkResource):
        self.lakehouse, self.instance, self.spark = lakehouse, instance, spark
        self.job = dg.build_reconstructable_job(__name__, "lsm_job",
                                                reconstructable_kwargs={"warehouse": lakehouse.warehouse})

    def stage(self, seed: int) -> None:
        """Land one day's events and stage them (ingestion and the bucket plan), as a run would."""
        self.batches = generate_order_events(days=1, rows_per_day=ROWS, seed=seed,
                                             start=datetime.date.fromisoformat(DAY))
        write_landing(self.lakehouse.landing_path, self.batches)
        assert dg.materialize([ingested_events, bucket_assignment], partition_key=DAY,
                              resources={"lakehouse": self.lakehouse, "spark": self.spark}, raise_on_error=False).success

    def run(self) -> Any:
        return dg.execute_job(self.job, instance=self.instance, tags={"dagster/partition": DAY}, raise_on_error=False)

    def from_failure(self, failed: Any) -> Any:
        options = dg.ReexecutionOptions.from_failure(failed.run_id, self.instance)
        # The run's partition, as Dagster's UI copies the parent run's tags onto a re-execution.
        return dg.execute_job(self.job, instance=self.instance, reexecution_options=options,
                              tags={"dagster/partition": DAY}, raise_on_error=False)

    def main_ids(self) -> list[int]:
        return self.lakehouse.get_table().snapshot_manager().list_snapshot_ids()

    def main_equals_staged(self) -> bool:
        """Main's merged rows are the staged events' (each key's last event), once."""
        expected = apply_to_model(self.batches)
        got = revenue.read_all(self.lakehouse.get_table()).select(expected.column_names)
        return got.sort_by([(k, "ascending") for k in PRIMARY_KEY]).cast(expected.schema).equals(expected)

    def pending(self) -> int:
        return len(Ledger(self.lakehouse.ledger_path).read().pending([DAY]))

    def appends_of_lsm_write(self) -> int:
        return sum(1 for s in self.lakehouse.get_table().snapshots()
                   if s.commit_kind == "APPEND" and s.commit_user.startswith("lsm_write-"))


@pytest.fixture
def runs(tmp_path: Path, instance: dg.DagsterInstance, spark_resource: LakehouseSparkResource) -> Runs:
    # spark_resource: the shared session is started before the jobs' resource joins it.
    runs = Runs(LakehouseResource(warehouse=str(tmp_path / "warehouse"), bucket=2), instance, spark_resource)
    runs.stage(seed=11)
    return runs


def _published(result: Any) -> dict[str, Any]:
    """The publish step's materialization metadata in a run."""
    return {k: getattr(v, "value", v) for event in result.get_asset_materialization_events()
            for mat in [event.step_materialization_data.materialization]
            if mat.asset_key == lsm_publish.key for k, v in mat.metadata.items()}


def _ran_steps(result: Any) -> set[str]:
    """The steps that ran and succeeded in a run."""
    return {e.step_key for e in result.all_events if e.is_step_success}


def test_a_publish_that_failed_is_published_by_the_re_execution_from_failure(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    def flaky(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the object store timed out")

    with monkeypatch.context() as patch:
        patch.setattr(wap, "publish", flaky)
        failed = runs.run()
    branch = wap.audit_branch_name(failed.run_id)
    assert not failed.success and runs.main_ids() == [] and runs.pending() == 1
    assert wap.audit_branches(runs.lakehouse.get_table()) == [branch]
    again = runs.from_failure(failed)
    # Before: the re-execution looked for its own run's branch, found none and published nothing.
    assert again.success and _ran_steps(again) == {"lsm_publish"}
    published = _published(again)
    assert published["published"] is True and published["audit_branch"] == branch
    assert published["batches_written"] == 1
    assert runs.main_equals_staged() and runs.appends_of_lsm_write() == 1 and runs.pending() == 0
    assert wap.audit_branches(runs.lakehouse.get_table()) == []
    # Once: the next run has nothing pending and main stays as published.
    assert runs.run().success
    assert runs.appends_of_lsm_write() == 1 and runs.main_equals_staged()


def test_an_audit_that_errored_audits_and_publishes_the_failed_runs_branch(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.lib import table_checks

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the object store timed out")

    with monkeypatch.context() as patch:
        patch.setattr(table_checks, "bucket_rows", unreadable)
        failed = runs.run()
    assert not failed.success and runs.main_ids() == [] and runs.pending() == 1
    again = runs.from_failure(failed)
    assert again.success and "lsm_write" not in _ran_steps(again)
    evaluations = {e.asset_check_key.name: e for e in again.get_asset_check_evaluations()}
    # The re-run check judged the failed run's branch, not main (which has no snapshot yet).
    counted = evaluations["bucket_row_counts_match_snapshot"]
    # (On main, which has no snapshot, it would have passed empty, saying so.)
    assert counted.passed and "note" not in counted.metadata and counted.metadata["rows_in_buckets"].value > 0
    assert _published(again)["published"] is True
    assert runs.main_equals_staged() and runs.pending() == 0


def died_after_the_fast_forward(runs: Runs, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A run whose `lsm_publish` died after main's fast-forward, before dropping the branch."""
    def die(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the process died")

    with monkeypatch.context() as patch:
        patch.setattr(wap, "discard", die)  # after the fast-forward, before dropping the branch
        failed = runs.run()
    assert not failed.success and runs.main_equals_staged() and runs.pending() == 1
    return failed


def test_a_publish_that_died_after_the_fast_forward_is_only_finished(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    failed = died_after_the_fast_forward(runs, monkeypatch)
    ids = runs.main_ids()
    again = runs.from_failure(failed)
    assert again.success and _published(again)["note"] == "main held the batch already"
    assert runs.main_ids() == ids and runs.appends_of_lsm_write() == 1  # not published twice
    assert runs.pending() == 0 and wap.audit_branches(runs.lakehouse.get_table()) == []


def test_a_publish_that_died_before_the_ledger_is_only_finished(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    def die(*args: Any, **kwargs: Any) -> list[str]:
        raise RuntimeError("the process died")

    with monkeypatch.context() as patch:
        patch.setattr(LedgerState, "mark_written", die)  # after the branch was dropped
        failed = runs.run()
    assert not failed.success and runs.main_equals_staged() and runs.pending() == 1
    assert wap.audit_branches(runs.lakehouse.get_table()) == []
    ids = runs.main_ids()
    again = runs.from_failure(failed)
    assert again.success and _published(again)["note"] == "main held the batch already"
    assert runs.main_ids() == ids and runs.pending() == 0


def test_a_re_execution_whose_branch_was_discarded_fails_and_changes_nothing(
        runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    def flaky(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the object store timed out")

    with monkeypatch.context() as patch:
        patch.setattr(wap, "publish", flaky)
        failed = runs.run()
    branch = wap.audit_branch_name(failed.run_id)
    wap.discard(runs.lakehouse.get_table(), branch)  # as a later lsm_write discards a finished run's
    again = runs.from_failure(failed)
    assert not again.success
    failures = [e.step_failure_data.error.message for e in again.all_events if e.is_step_failure]
    assert any(f"audit branch {branch}" in m and "is gone" in m for m in failures), failures
    assert runs.main_ids() == [] and runs.pending() == 1
