"""The publish step of write-audit-publish: after lsm_write's blocking checks passed on the run's
audit branch, fast-forward main to it and record the staged rows as written.

A blocking check that fails stops the run before this step: main is untouched and the branch stays
for inspection (the next lsm_write, or `lakehouse delete-branch`, discards it). When main moved
after the branch point (a compaction, a rescale, another writer), a fast-forward would drop those
snapshots: the step rebases instead (the batch written again on main's latest, in a new audit
branch), checks the audit's conditions there and publishes that; when the engine refuses the
rebase or the re-check fails, the step fails, main untouched, and the rows stay pending.
"""

import shutil

import dagster as dg

from pipelines.lib import keys, wap
from pipelines.lib.ledger import Ledger
from pipelines.lib.partitions import DAILY_PARTITIONS, SINGLE_RUN
from pipelines.lib.resources import DEFAULT_TABLE, LakehouseResource, table_pool
from pipelines.lib.table_checks import recheck_rebased


@dg.asset(
    key=keys.LSM_PUBLISH,
    partitions_def=DAILY_PARTITIONS,
    backfill_policy=SINGLE_RUN,
    deps=[keys.LSM_WRITE],
    pool=table_pool(DEFAULT_TABLE),
    group_name="lsm",
    kinds={"paimon"},
    description="Publish the audited write: fast-forward main to the run's audit branch (only after "
                "lsm_write's blocking checks passed there); when main moved after the branch point, "
                "rebase the batch onto main's latest, check it again, and publish that.",
)
def lsm_publish(context: dg.AssetExecutionContext, lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Fast-forward main to this run's audit branch and mark the rows it committed as written."""
    main = lakehouse.get_or_create_table()
    branch = wap.audit_branch_name(context.run.run_id)
    if branch not in main.list_branches():
        latest = main.latest_snapshot()
        return dg.MaterializeResult(metadata={"published": False, "note": f"no audit branch {branch} in this run",
                                              "main_snapshot_id": latest.id if latest else 0})
    try:
        done = wap.publish(main, branch, recheck=recheck_rebased)
    except (wap.MainMovedError, wap.RecheckFailedError) as exc:
        raise dg.Failure(description=str(exc), metadata={"audit_branch": branch,
                                                          "branch_base_snapshot": wap.branch_base(main, branch)}) from exc
    main = lakehouse.get_table()
    written: list[str] = []
    ledger = Ledger(lakehouse.ledger_path)
    with ledger.update() as state:
        for user, entries in state.committing_users(state.pending(context.partition_keys)).items():
            landed = main.committed_snapshots(user)
            if landed:
                written += state.mark_written(entries, landed[-1])
    for batch in written:  # in main now: the staged copy is no longer needed
        shutil.rmtree(lakehouse.staging_path / f"batch={batch}", ignore_errors=True)
    if done.rebased_from:
        context.log.info(f"main moved after {done.rebased_from} was made ({done.main_commits_kept}): "
                         f"its batch was rebased onto snapshot {done.main_before} as {done.branch} and passed "
                         f"the audit's conditions there")
    context.log.info(f"published {done.branch}: main {done.main_before} -> {done.main_after} "
                     f"({done.snapshots_published} snapshots)")
    return dg.MaterializeResult(metadata={**done.metadata(), "audit_branch": branch,
                                          "batches_written": len(written)})
