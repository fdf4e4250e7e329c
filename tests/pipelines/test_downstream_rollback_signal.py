"""`daily_revenue` recognises orders rolled back and written again under its consumer by the
revenue commit that counted the consumed snapshots, not by the consumer file's modification time:
a rewrite in the second after a publish was missed, and every later audit failed on it."""

from __future__ import annotations

from typing import Any

import dagster as dg

from pipelines.defs.downstream.assets import (
    FAILED_AUDITS_BEFORE_RECOMPUTE,
    daily_revenue,
    revenue_table_name,
)
from pipelines.defs.downstream.checks import revenue_equals_full_recompute
from pipelines.defs.downstream.publish import daily_revenue_publish
from pipelines.lib import revenue
from pipelines.lib.resources import LakehouseResource
from tests.pipelines.conftest import (
    engine_write,
    metadata_of,
    run_daily_revenue,
    three_batches,
)


def test_a_rollback_written_again_right_after_a_publish_is_recomputed(lakehouse: LakehouseResource) -> None:
    a, b, c = three_batches()
    engine_write(lakehouse, a)
    kept = lakehouse.get_table().latest_snapshot().id
    run_daily_revenue(lakehouse)
    engine_write(lakehouse, b)
    run_daily_revenue(lakehouse)
    # No pause: the rewritten snapshots are younger than the consumer file by less than its 1 s
    # slack. Before, the run went on incrementally, kept b's sums and failed its audit, and so did
    # every run after it (the consumer never moved, the rewrite was never seen).
    orders = lakehouse.get_table()
    orders.rollback_to(kept)
    engine_write(lakehouse, c)  # takes the ids b had
    meta = metadata_of(run_daily_revenue(lakehouse), "daily_revenue")
    assert str(meta["mode"]).startswith("full (recomputed: orders snapshot")
    target = lakehouse.catalog().get_table(revenue_table_name(lakehouse))
    assert revenue.live_groups(revenue.read_all(target)).equals(
        revenue.full_aggregate(revenue.read_all(lakehouse.get_table())))
    engine_write(lakehouse, b)
    assert metadata_of(run_daily_revenue(lakehouse), "daily_revenue")["mode"] == "incremental"


def _run_on(lakehouse: LakehouseResource, instance: dg.DagsterInstance) -> Any:
    return dg.materialize([daily_revenue, revenue_equals_full_recompute, daily_revenue_publish],
                          resources={"lakehouse": lakehouse}, instance=instance, raise_on_error=False)


def _audit_passed(result: Any) -> bool:
    checks = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    return bool(result.success and checks and all(c.passed for c in checks))


def test_a_run_after_a_failed_audit_recomputes_in_full(lakehouse: LakehouseResource) -> None:
    """Whatever made the sums wrong (here: the revenue table rolled back by hand under its
    consumer), the run after audits of the same changes failed twice recomputes instead of failing
    the same way forever (before, every run added the same changes to the same wrong sums)."""
    a, b, c = three_batches()
    with dg.DagsterInstance.ephemeral() as instance:
        engine_write(lakehouse, a)
        assert _audit_passed(_run_on(lakehouse, instance))
        target = lakehouse.catalog().get_table(revenue_table_name(lakehouse))
        first = target.latest_snapshot().id
        engine_write(lakehouse, b)
        assert _audit_passed(_run_on(lakehouse, instance))
        target.rollback_to(first)  # b's sums are gone, the consumer is past b
        engine_write(lakehouse, c)
        for _ in range(FAILED_AUDITS_BEFORE_RECOMPUTE):  # (the first retry reads the same changes)
            assert not _audit_passed(_run_on(lakehouse, instance))
        result = _run_on(lakehouse, instance)
        assert _audit_passed(result)
        assert str(metadata_of(result, "daily_revenue")["mode"]).startswith("full (recomputed: the last audits")
        assert revenue.live_groups(revenue.read_all(target)).equals(
            revenue.full_aggregate(revenue.read_all(lakehouse.get_table())))
        engine_write(lakehouse, b)
        assert metadata_of(_run_on(lakehouse, instance), "daily_revenue")["mode"] == "incremental"
