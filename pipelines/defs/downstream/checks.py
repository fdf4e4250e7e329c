"""The blocking check of `daily_revenue`: the incrementally kept table equals the aggregate
recomputed from `shop.orders` in full at the snapshot the asset consumed up to."""

import dagster as dg

from lakehouse_engine import TableNotExistError
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
    return dg.AssetCheckResult(
        passed=same,
        description=None if same else f"{differ} (dt, status) groups differ from the full recompute at "
                                      f"snapshot {at}",
        metadata={"orders_snapshot": at, "groups": got.num_rows, "groups_expected": expected.num_rows,
                  "groups_differing": differ,
                  "orders_counted": int(sum(got.column(revenue.ORDERS).to_pylist()))})
