"""The blocking check of `daily_revenue`: the incrementally kept table equals the aggregate
recomputed from `shop.orders` in full at the snapshot the asset consumed up to. A failing check
undoes the run it checked (the revenue table rolled back to before its commit, the consumer moved
back to where that commit started), so readers see the last verified aggregate and the next run
reads the same changes again."""

from typing import Any

import dagster as dg

from lakehouse_engine import FileStoreTable, TableNotExistError
from pipelines.defs.downstream.assets import CONSUMER_ID, revenue_table_name
from pipelines.lib import keys, revenue
from pipelines.lib.resources import LakehouseResource


@dg.asset_check(asset=keys.DAILY_REVENUE, blocking=True,
                description="daily_revenue equals revenue and order counts per (dt, status) recomputed "
                            "from every row of shop.orders at the snapshot its consumer has read up to.")
def revenue_equals_full_recompute(lakehouse: LakehouseResource) -> dg.AssetCheckResult:
    try:
        target = lakehouse.catalog().get_table(revenue_table_name(lakehouse))
        orders = lakehouse.get_table()
    except TableNotExistError:
        return dg.AssetCheckResult(passed=True, metadata={"note": "no table yet"})
    consumer = orders.consumer_manager().consumer(CONSUMER_ID)
    if consumer is None or consumer.next_snapshot <= 1:
        return dg.AssetCheckResult(passed=True, metadata={"note": "nothing consumed yet"})
    at = consumer.next_snapshot - 1
    expected = revenue.full_aggregate(revenue.read_all(orders, at))
    got = revenue.live_groups(revenue.read_all(target))
    same = got.equals(expected)
    differ = 0
    if not same:
        key = {tuple(r[c] for c in revenue.GROUP): r for r in expected.to_pylist()}
        mine = {tuple(r[c] for c in revenue.GROUP): r for r in got.to_pylist()}
        differ = sum(1 for k in key.keys() | mine.keys() if key.get(k) != mine.get(k))
    undone: dict[str, Any] = {} if same else undo_last_run(target, orders)
    return dg.AssetCheckResult(
        passed=same,
        description=None if same else f"{differ} (dt, status) groups differ from the full recompute at "
                                      f"snapshot {at}",
        metadata={"orders_snapshot": at, "groups": got.num_rows, "groups_expected": expected.num_rows,
                  "groups_differing": differ,
                  "orders_counted": int(sum(got.column(revenue.ORDERS).to_pylist())), **undone})


def undo_last_run(target: FileStoreTable, orders: FileStoreTable) -> dict[str, Any]:
    """Roll the revenue table back to before the last run's commit and move the consumer back
    to where that run started; what was done, as check metadata."""
    consumers = orders.consumer_manager()
    consumer = consumers.consumer(CONSUMER_ID)
    runs = [s for s in target.snapshots() if s.commit_user == CONSUMER_ID]
    if consumer is None or not runs or runs[-1].commit_identifier != consumer.next_snapshot:
        return {"undone": "no: the last commit is not the consumed position's"}
    # A run's commit may be an APPEND and the COMPACT after it, both under its identifier.
    first = min(s.id for s in runs if s.commit_identifier == consumer.next_snapshot)
    earliest = target.snapshot_manager().earliest_snapshot_id() or first
    if first - 1 < earliest:
        return {"undone": f"no: snapshot {first - 1} of the revenue table is not retained"}
    target.rollback_to(first - 1)
    earlier = [s for s in runs if s.id < first]
    before = earlier[-1].commit_identifier if earlier else None
    if before is not None:
        consumers.reset_consumer(CONSUMER_ID, before)
    else:
        consumers.delete_consumer(CONSUMER_ID)  # the next run recomputes in full
    return {"undone": f"yes: revenue rolled back to snapshot {first - 1}, consumer to {before}"}
