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
from typing import Any

import dagster as dg

from pipelines.lib import keys, wap
from pipelines.lib.ledger import Ledger
from pipelines.lib.partitions import DAILY_PARTITIONS, SINGLE_RUN
from pipelines.lib.resources import DEFAULT_TABLE, LakehouseResource, table_pool
from pipelines.lib.table_checks import lsm_write_metadata, recheck_rebased, written_run


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
    # A re-execution from failure publishes the branch of the run whose lsm_write it carries on.
    run_id = written_run(context.instance, context.run.run_id)
    # A publish that died after rebasing left the batch in the rebased branch (the audited one dropped).
    branch = wap.branch_holding_batch(main, run_id) or wap.audit_branch_name(run_id)
    carried = run_id != context.run.run_id
    if wap.fast_forwarded(main, branch):
        # The failed run's publish fast-forwarded main, then died before dropping the branch.
        wap.discard(main, branch)
        return _finish(context, lakehouse, {"published": True, "note": "main held the batch already",
                                            "audit_branch": branch})
    if branch not in main.list_branches():
        latest = main.latest_snapshot()
        if not carried:
            return dg.MaterializeResult(metadata={"published": False, "note": f"no audit branch {branch} in this run",
                                                  "main_snapshot_id": latest.id if latest else 0})
        users = [m["commit_user"] for m in lsm_write_metadata(context.instance, run_id)
                 if m.get("commit_user", "none") != "none"]
        if any(main.committed_snapshots(user) for user in users):
            # The failed run's publish got past dropping the branch, and died before the ledger.
            return _finish(context, lakehouse, {"published": True, "note": "main held the batch already",
                                                "audit_branch": branch})
        raise dg.Failure(description=(
            f"audit branch {branch} of run {run_id}, which this re-execution publishes, is gone (a later "
            f"lsm_write discarded it, or it was deleted by hand) and main does not hold its batch: nothing "
            f"was published; the staged rows stay pending and the next run writes and audits them again"),
            metadata={"audit_branch": branch, "main_snapshot_id": latest.id if latest else 0})
    try:
        done = wap.publish(main, branch, recheck=recheck_rebased)
    except (wap.MainMovedError, wap.RecheckFailedError) as exc:
        raise dg.Failure(description=str(exc), metadata={"audit_branch": branch,
                                                          "branch_base_snapshot": wap.branch_base(main, branch)}) from exc
    if done.rebased_from:
        context.log.info(f"main moved after {done.rebased_from} was made ({done.main_commits_kept}): "
                         f"its batch was rebased onto snapshot {done.main_before} as {done.branch} and passed "
                         f"the audit's conditions there")
    context.log.info(f"published {done.branch}: main {done.main_before} -> {done.main_after} "
                     f"({done.snapshots_published} snapshots)")
    return _finish(context, lakehouse, {**done.metadata(), "audit_branch": branch})


def _finish(context: dg.AssetExecutionContext, lakehouse: LakehouseResource,
            metadata: dict[str, Any]) -> dg.MaterializeResult:
    """Mark the run's days' pending rows whose commit main holds as written, drop their staged
    copies, and report `metadata` with the batches written."""
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
    if metadata.get("note"):
        context.log.info(f"{metadata['note']} ({metadata['audit_branch']}): {len(written)} batches recorded written")
    latest = main.latest_snapshot()
    return dg.MaterializeResult(metadata={"main_snapshot_id": latest.id if latest else 0, **metadata,
                                          "batches_written": len(written)})
