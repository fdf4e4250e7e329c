"""What the Dagster instance knows about runs, for the write-audit-publish writers: which audit
branches belong to runs still in progress (open audits) and which to finished ones."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg


def run_is_running(instance: dg.DagsterInstance) -> Callable[[str], bool]:
    """Whether a run id names a run that exists and has not finished (its audit branch is an open
    audit), as `wap.discard_finished` asks it."""

    def running(run_id: str) -> bool:
        run = instance.get_run_by_id(run_id)
        return run is not None and not run.is_finished

    return running
