"""The publish step of `daily_revenue`'s write-audit-publish: after `revenue_equals_full_recompute`
passed on the run's audit branch of `shop.daily_revenue`, fast-forward main to it, then move the
orders consumer `daily_revenue` past the changes the branch counted.

A failing check stops the run before this step: main is untouched, the consumer has not moved (the
next run reads the same changes again) and the branch stays for inspection until the next
`daily_revenue` discards it. When main moved after the branch point (a compaction of the revenue
table, a writer outside the pool), the batch of deltas is rebased onto main's latest and the sums
checked there again (`wap.publish`); a recompute (an OVERWRITE) is not rebased: the step fails, main
and the consumer untouched, and the next run recomputes again.
"""

import dagster as dg

from lakehouse_engine import FileStoreTable
from pipelines.defs.downstream.assets import (
    CONSUMER_ID,
    Consumed,
    audited_run,
    consumed_in_run,
    last_commit,
    revenue_table_name,
)
from pipelines.lib import keys, revenue, wap
from pipelines.lib.partitions import SINGLE_RUN
from pipelines.lib.resources import LakehouseResource, table_pool


def _recheck(orders: FileStoreTable, consumed: Consumed) -> wap.Recheck:
    """The audit's condition on a batch rebased onto main's latest: the sums equal the full
    recompute at the snapshot the run consumed up to."""

    def recheck(main: FileStoreTable, rebased: FileStoreTable, audited: FileStoreTable) -> list[str]:
        found = revenue.compare_with_recompute(rebased, orders, consumed.at)
        return [] if found.same else [f"revenue_equals_full_recompute: {found.describe(consumed.at)}"]

    return recheck


def _published_before(target: FileStoreTable, branch: str, consumed: Consumed) -> bool:
    """Whether main already holds the branch's sums: its last commit of the consumer is the
    branch's (fast-forwarded, the branch still there) or, the branch gone, one with the
    identifier of the run's changes (the consumer did not move: it is behind them)."""
    main = last_commit(target)
    if main is None or main.commit_identifier != consumed.after:
        return False
    if branch not in target.list_branches():
        return True
    head = target.branch_table(branch).latest_snapshot()
    return head is not None and head.id == main.id and head.time_millis == main.time_millis


@dg.asset(
    key=keys.DAILY_REVENUE_PUBLISH,
    backfill_policy=SINGLE_RUN,
    deps=[keys.DAILY_REVENUE],
    pool=table_pool("shop.daily_revenue"),
    group_name="downstream",
    kinds={"paimon"},
    # Only in the run of the daily_revenue it publishes: a daily_revenue whose audit failed is not
    # published by a later run on its own (its branch belongs to the failed run).
    automation_condition=dg.AutomationCondition.any_deps_match(
        dg.AutomationCondition.will_be_requested()).with_label("with daily_revenue"),
    description="Publish the audited revenue: fast-forward main of shop.daily_revenue to the run's "
                "audit branch (only after revenue_equals_full_recompute passed there; rebased and "
                "checked again when main moved), then move the orders consumer 'daily_revenue'.",
)
def daily_revenue_publish(context: dg.AssetExecutionContext, lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Fast-forward the revenue table's main to this run's audit branch, then move the consumer."""
    # A re-execution from failure publishes the branch of the run whose daily_revenue it carries on.
    run_id = audited_run(context.instance, context.run.run_id)
    consumed = consumed_in_run(context.instance, run_id)
    if consumed is None:
        return dg.MaterializeResult(metadata={"published": False,
                                              "note": "daily_revenue consumed nothing in this run"})
    orders = lakehouse.get_table()
    target = revenue.get_or_create(lakehouse.catalog(), revenue_table_name(lakehouse))
    branch = wap.audit_branch_name(run_id)
    consumers = orders.consumer_manager()
    now = consumers.consumer(CONSUMER_ID)
    if (now.next_snapshot if now is not None else 0) != consumed.before:
        # Another run published from the same position meanwhile: these changes are counted.
        raise dg.Failure(description=(
            f"consumer {CONSUMER_ID} of {lakehouse.table} moved from {consumed.before} to "
            f"{now.next_snapshot if now is not None else 'none'} since this run read the changes: another "
            f"run published them. Nothing was published; branch {branch} is kept for inspection and the "
            f"next run goes on from the consumer"), metadata={"audit_branch": branch})
    if _published_before(target, branch, consumed):
        # The failed run's publish fast-forwarded main and died before moving the consumer.
        consumers.reset_consumer(CONSUMER_ID, consumed.after)
        wap.discard(target, branch)
        context.log.info(f"main already held the sums of {branch}: consumer {CONSUMER_ID} -> {consumed.after}")
        return dg.MaterializeResult(metadata={"published": True, "note": "main held the sums already",
                                              "audit_branch": branch, "consumer_before": consumed.before,
                                              "consumer_next_snapshot": consumed.after})
    if branch not in target.list_branches():
        raise dg.Failure(description=(
            f"audit branch {branch} of run {run_id} is gone (a later daily_revenue run discarded it): "
            f"nothing was published, the consumer {CONSUMER_ID} stays at {consumed.before} and the next "
            f"run reads the same changes again"), metadata={"audit_branch": branch})
    try:
        done = wap.publish(target, branch, recheck=_recheck(orders, consumed))
    except (wap.MainMovedError, wap.RecheckFailedError) as exc:
        raise dg.Failure(description=f"{exc}. The consumer {CONSUMER_ID} stays at {consumed.before}: the "
                                     f"next run reads the same changes again",
                         metadata={"audit_branch": branch,
                                   "branch_base_snapshot": wap.branch_base(target, branch)}) from exc
    # Only now: a run that dies before this line is repaired by the next one (main's last commit
    # of the consumer's identifier is ahead of the consumer).
    consumers.reset_consumer(CONSUMER_ID, consumed.after)
    if done.rebased_from:
        context.log.info(f"main moved after {done.rebased_from} was made ({done.main_commits_kept}): "
                         f"its deltas were rebased onto snapshot {done.main_before} as {done.branch} and "
                         f"passed the recompute there")
    context.log.info(f"published {done.branch}: main {done.main_before} -> {done.main_after} "
                     f"({done.snapshots_published} snapshots); consumer {CONSUMER_ID} -> {consumed.after}")
    return dg.MaterializeResult(metadata={
        **done.metadata(), "audit_branch": branch, "consumer_before": consumed.before,
        "consumer_next_snapshot": consumed.after})
