"""`daily_revenue` when its consumer cannot simply go on: the orders table was rolled back under it
(and written again), the consumer was dropped while the revenue table keeps its sums, or the
snapshots it had to read expired. Each run must leave the revenue table equal to the full
recompute its blocking check makes (test_downstream_wap.py: the audit and the publish)."""

from __future__ import annotations

import time

from pipelines.defs.downstream.assets import CONSUMER_ID, revenue_table_name
from pipelines.lib import revenue
from pipelines.lib.resources import LakehouseResource
from tests.pipelines.conftest import (
    engine_write,
    metadata_of,
    run_daily_revenue,
    three_batches,
)


def _equals_recompute(lakehouse: LakehouseResource) -> bool:
    orders = lakehouse.get_table()
    target = lakehouse.catalog().get_table(revenue_table_name(lakehouse))
    return revenue.live_groups(revenue.read_all(target)).equals(revenue.full_aggregate(revenue.read_all(orders)))


def test_a_rollback_of_orders_written_again_is_recomputed_not_added_to(lakehouse: LakehouseResource) -> None:
    a, b, c = three_batches()
    engine_write(lakehouse, a)
    kept = lakehouse.get_table().latest_snapshot().id
    run_daily_revenue(lakehouse)
    engine_write(lakehouse, b)
    run_daily_revenue(lakehouse)
    time.sleep(1.2)  # past the clock slack: the rewritten snapshots are newer than the consumer
    orders = lakehouse.get_table()
    orders.rollback_to(kept)
    engine_write(lakehouse, c)  # takes the ids b had: the consumer's position looks valid
    # Before: the run read nothing new (the ids were consumed) and the table kept b's sums.
    meta = metadata_of(run_daily_revenue(lakehouse), "daily_revenue")
    assert str(meta["mode"]).startswith("full (recomputed: orders snapshot")
    assert _equals_recompute(lakehouse)
    engine_write(lakehouse, b)
    assert metadata_of(run_daily_revenue(lakehouse), "daily_revenue")["mode"] == "incremental"
    assert _equals_recompute(lakehouse)


def test_a_rollback_below_the_consumer_is_recomputed(lakehouse: LakehouseResource) -> None:
    a, b, _ = three_batches()
    engine_write(lakehouse, a)
    kept = lakehouse.get_table().latest_snapshot().id
    run_daily_revenue(lakehouse)
    engine_write(lakehouse, b)
    run_daily_revenue(lakehouse)
    lakehouse.get_table().rollback_to(kept)
    meta = metadata_of(run_daily_revenue(lakehouse), "daily_revenue")
    assert str(meta["mode"]).startswith("full (recomputed: orders was rolled back")
    assert _equals_recompute(lakehouse)


def test_a_dropped_consumer_whose_commits_expired_is_recomputed_not_counted_twice(
        lakehouse: LakehouseResource) -> None:
    a, b, _ = three_batches()
    engine_write(lakehouse, a)
    run_daily_revenue(lakehouse)
    engine_write(lakehouse, b)
    # The consumer gone (consumer.expiration-time, or a `lakehouse consumers` reset) and the
    # revenue table's own commits expired behind a compaction: before, the run took itself for
    # the first one, read orders in full and added them to the sums the table already had.
    lakehouse.get_table().consumer_manager().delete_consumer(CONSUMER_ID)
    target = lakehouse.catalog().get_table(revenue_table_name(lakehouse))
    target.compact(full=True)
    target.expire_snapshots(retain_max=1, retain_min=1)
    assert all(s.commit_user != CONSUMER_ID for s in target.snapshots())
    meta = metadata_of(run_daily_revenue(lakehouse), "daily_revenue")
    assert str(meta["mode"]).startswith("full (recomputed: the revenue table holds sums")
    assert _equals_recompute(lakehouse)


def test_a_position_whose_snapshots_expired_is_recomputed_not_failed_forever(
        lakehouse: LakehouseResource) -> None:
    a, b, c = three_batches()
    engine_write(lakehouse, a)
    run_daily_revenue(lakehouse)
    engine_write(lakehouse, b)
    engine_write(lakehouse, c)
    # The consumer dropped, expiry then free to remove what it had not read; the revenue table's
    # last commit puts the consumer back where it was. Before, every later run failed on the
    # missing snapshot.
    orders = lakehouse.get_table()
    orders.consumer_manager().delete_consumer(CONSUMER_ID)
    orders.expire_snapshots(retain_max=1, retain_min=1)
    meta = metadata_of(run_daily_revenue(lakehouse), "daily_revenue")
    assert "expired before they were read" in str(meta["mode"])
    assert _equals_recompute(lakehouse)
