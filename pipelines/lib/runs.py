"""What the Dagster instance knows about runs, for the write-audit-publish writers: which audit
branches belong to runs still in progress (open audits) and which to finished ones, and which run
a re-execution from failure carries on."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

#: Dagster's tags on a re-execution: the run it re-executes and the first run of the chain.
PARENT_RUN_TAG = "dagster/parent_run_id"
ROOT_RUN_TAG = "dagster/root_run_id"


def run_is_running(instance: dg.DagsterInstance) -> Callable[[str], bool]:
    """Whether a run id names a run that exists and has not finished, or whose re-execution has
    not (its audit branch is an open audit: a re-execution from failure publishes it), as
    `wap.discard_finished` asks it."""

    def running(run_id: str) -> bool:
        run = instance.get_run_by_id(run_id)
        if run is None:
            return False
        if not run.is_finished:
            return True
        root = run.root_run_id or run.run_id
        again = instance.get_runs(filters=dg.RunsFilter(tags={ROOT_RUN_TAG: root}))
        return any(not r.is_finished for r in again)

    return running


def run_carrying(instance: dg.DagsterInstance, run_id: str, materialized: Callable[[str], bool]) -> str:
    """The run whose work run `run_id` carries on: itself when `materialized(run id)` holds for
    it, else (a re-execution from failure runs only the failed steps, so the asset they audit or
    publish materialized in an earlier run of the chain) the nearest parent run where it does;
    `run_id` itself when none does."""
    current = instance.get_run_by_id(run_id)
    while current is not None:
        if materialized(current.run_id):
            return current.run_id
        parent = current.parent_run_id
        current = instance.get_run_by_id(parent) if parent else None
    return run_id
