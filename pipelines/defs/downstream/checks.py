"""The blocking check of `daily_revenue`: the run's audit branch of the revenue table equals the
aggregate recomputed from `shop.orders` in full at the snapshot the run consumed up to. It reads
the branch before anyone else can: a failure stops the run before `daily_revenue_publish`, so
main and the consumer stay where they were and the next run reads the same changes again."""

import dagster as dg

from lakehouse_engine import TableNotExistError
from pipelines.defs.downstream.assets import (
    CONSUMER_ID,
    audited_run,
    consumed_in_run,
    revenue_table_name,
)
from pipelines.lib import keys, revenue, wap
from pipelines.lib.resources import LakehouseResource


@dg.asset_check(asset=keys.DAILY_REVENUE, blocking=True,
                description="daily_revenue equals revenue and order counts per (dt, status) recomputed "
                            "from every row of shop.orders at the snapshot it consumed up to (on the "
                            "run's audit branch; on main at the consumer's position when daily_revenue "
                            "did not run in this run).")
def revenue_equals_full_recompute(context: dg.AssetCheckExecutionContext,
                                  lakehouse: LakehouseResource) -> dg.AssetCheckResult:
    try:
        target = lakehouse.catalog().get_table(revenue_table_name(lakehouse))
        orders = lakehouse.get_table()
    except TableNotExistError:
        return dg.AssetCheckResult(passed=True, metadata={"note": "no table yet"})
    # A re-execution from failure audits the branch of the run whose daily_revenue it carries on.
    run_id = audited_run(context.instance, context.run.run_id)
    consumed = consumed_in_run(context.instance, run_id)
    branch = wap.audit_branch_name(run_id)
    if consumed is not None and branch in target.list_branches():
        table, at, position = target.branch_table(branch), consumed.at, consumed.before
    else:  # the check on its own: what main's readers see, as of what the consumer has read
        consumer = orders.consumer_manager().consumer(CONSUMER_ID)
        if consumer is None or consumer.next_snapshot <= 1:
            return dg.AssetCheckResult(passed=True, metadata={"note": "nothing consumed yet"})
        table, at, position = target, consumer.next_snapshot - 1, consumer.next_snapshot
    found = revenue.compare_with_recompute(table, orders, at)
    main = target.latest_snapshot()
    return dg.AssetCheckResult(
        passed=found.same,
        description=None if found.same else f"{found.describe(at)} on {table.branch}",
        # consumer_before: the position the audited sums went on from (the next daily_revenue
        # recomputes in full when an audit from its position failed: assets.audit_failed_at).
        metadata={"orders_snapshot": at, "branch": table.branch, "consumer_before": position, "groups": found.got.num_rows,
                  "groups_expected": found.expected.num_rows, "groups_differing": found.groups_differing,
                  "orders_counted": int(sum(found.got.column(revenue.ORDERS).to_pylist())),
                  # What readers of main see while the run is audited (untouched until the publish).
                  "main_snapshot_id": main.id if main is not None else 0})
