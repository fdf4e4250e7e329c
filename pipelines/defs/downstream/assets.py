"""`daily_revenue`: revenue and order counts per day and status in a second Paimon table, kept up
to date from `shop.orders`'s changelog, incrementally, with write-audit-publish.

Each run reads only the changes since the last one through the consumer `daily_revenue` (the
asset's cursor: `consumer/consumer-daily_revenue` in the orders table, which snapshot expiry
respects), turns them into per-group deltas (`+I`/`+U` add, `-U`/`-D` subtract) and commits them
into the run's audit branch of the aggregation table (`pipelines/lib/wap.py`), never to main.
The blocking check reads the branch; `daily_revenue_publish` (`publish.py`) fast-forwards main
and only then moves the consumer, so a failed audit leaves main and the consumer where they were.
The commit carries the consumer's next snapshot as its commit identifier, so a publish that died
between the fast-forward and moving the consumer is recognised and not counted twice. The first
run, with no consumer yet, reads the orders table in full.
"""

from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa

from lakehouse_engine import POSTPONE_BUCKET, FileStoreTable, Snapshot
from pipelines.lib import keys, revenue, wap
from pipelines.lib.partitions import SINGLE_RUN
from pipelines.lib.resources import LakehouseResource, table_pool
from pipelines.lib.runs import run_carrying, run_is_running

CONSUMER_ID = "daily_revenue"
CHANGE_COLUMNS = ["dt", "status", "amount"]
#: How far the writer's clock may run ahead of the file system's before a snapshot counts as newer
#: than the consumer (a false alarm only costs a full recompute).
CLOCK_SLACK_MILLIS = 1000


def revenue_table_name(lakehouse: LakehouseResource) -> str:
    """`<database of the orders table>.daily_revenue`."""
    return f"{lakehouse.table.split('.', 1)[0]}.daily_revenue"


@dataclass(frozen=True)
class Consumed:
    """What `daily_revenue` read in a run: the consumer's next snapshot when it started (0: no
    consumer) and after the changes it committed to the run's audit branch."""

    before: int
    after: int

    @property
    def at(self) -> int:
        """The orders snapshot the audited sums are as of."""
        return self.after - 1


def consumed_in_run(instance: dg.DagsterInstance, run_id: str) -> Consumed | None:
    """What `daily_revenue` consumed in run `run_id` (its materialization's metadata); None when it
    did not materialize there or read nothing (no orders yet, a postpone-bucket table)."""
    found = None
    for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        mat = event.asset_materialization
        if mat is not None and mat.asset_key == keys.DAILY_REVENUE and "consumer_next_snapshot" in mat.metadata:
            before, after = (getattr(mat.metadata[k], "value", None) for k in ("consumer_before",
                                                                                  "consumer_next_snapshot"))
            found = Consumed(int(before or 0), int(after or 0))
    return found


def daily_revenue_ran_in(instance: dg.DagsterInstance, run_id: str) -> bool:
    """Whether `daily_revenue` materialized in run `run_id` (whatever it read)."""
    return any(event.asset_materialization is not None and event.asset_materialization.asset_key == keys.DAILY_REVENUE
               for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION))


def audited_run(instance: dg.DagsterInstance, run_id: str) -> str:
    """The run whose `daily_revenue` (and audit branch) run `run_id` audits and publishes: itself,
    or for a re-execution from failure that did not run `daily_revenue` again, the earlier run
    of its chain that did (its branch holds the changes the failed run should have published)."""
    return run_carrying(instance, run_id, lambda rid: daily_revenue_ran_in(instance, rid))


#: How many audits in a row may fail on the changes from one consumer position before the next
#: run recomputes in full (the first retry reads the same changes again: a failure may be passing).
FAILED_AUDITS_BEFORE_RECOMPUTE = 2


def audit_failed_at(instance: dg.DagsterInstance, position: int) -> bool:
    """Whether the latest `FAILED_AUDITS_BEFORE_RECOMPUTE` evaluations of
    `revenue_equals_full_recompute` all failed on sums that went on from the consumer position
    `position` (their `consumer_before`): adding the same changes to the same sums again would fail
    the same way (whatever made them wrong: a revenue table rolled back by hand, a rewrite of
    orders no signal caught), so the next run recomputes."""
    key = dg.AssetCheckKey(keys.DAILY_REVENUE, "revenue_equals_full_recompute")
    # Evaluated ones, newest first (this run's own check is planned already, not evaluated; a run
    # that died before its check left one planned too).
    evaluations = []
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=20):
        event = record.event.dagster_event if record.event is not None else None
        if event is not None and isinstance(event.event_specific_data, dg.AssetCheckEvaluation):
            evaluations.append(event.event_specific_data)
            if len(evaluations) == FAILED_AUDITS_BEFORE_RECOMPUTE:
                break
    return len(evaluations) == FAILED_AUDITS_BEFORE_RECOMPUTE and all(
        not e.passed and getattr(e.metadata.get("consumer_before"), "value", None) == position
        for e in evaluations)


def last_commit(table: FileStoreTable) -> Snapshot | None:
    """The revenue table's last snapshot this asset committed (its identifier: the orders
    snapshot after the last one it counted)."""
    for snapshot in reversed(table.snapshots()):
        if snapshot.commit_user == CONSUMER_ID:
            return snapshot
    return None


def _last_committed(table: FileStoreTable) -> int | None:
    """The orders snapshot after the last one this asset committed (its commit identifier)."""
    last = last_commit(table)
    return last.commit_identifier if last is not None else None


def cannot_continue(orders: FileStoreTable, position: int | None, target: FileStoreTable) -> str | None:
    """Why the revenue table cannot go on from the consumer's position (its next snapshot; None: no
    consumer) and must be recomputed in full, or None: orders rolled back below the position, the position's snapshots expired (a
    consumer that `consumer.expiration-time` dropped), or sums without any position to continue."""
    latest = orders.latest_snapshot()
    latest_id = latest.id if latest is not None else 0
    if position is None:
        if target.latest_snapshot() is not None and revenue.read_all(target).num_rows:
            return "the revenue table holds sums but orders has no consumer to continue from"
        return None
    if position > latest_id + 1:
        return (f"orders was rolled back to snapshot {latest_id}, before what was consumed "
                f"(up to {position - 1})")
    read_last = orders.snapshot_manager().get_snapshot_by_id(position - 1)
    counted = last_commit(target)
    if (read_last is not None and counted is not None and counted.commit_identifier == position
            and read_last.time_millis > counted.time_millis):
        # The revenue commit that counted the changes up to the snapshot was made after that
        # snapshot was read, so after it was committed: a later one took its id (both times are
        # writers' clocks; the consumer file's time below is the file system's, and it moves only
        # at the publish, which missed a rewrite in the audit and the slack).
        return (f"orders snapshot {read_last.id} was committed after the revenue commit that counted "
                f"it (orders was rolled back and written again)")
    moved = orders.consumer_manager().modified_millis(CONSUMER_ID)
    if read_last is not None and moved is not None and read_last.time_millis > moved + CLOCK_SLACK_MILLIS:
        # The snapshot the consumer read last was committed after the consumer moved past it: a
        # rollback removed the one that was read, and a new commit took its id.
        return (f"orders snapshot {read_last.id} was committed after it was consumed (orders was "
                f"rolled back and written again)")
    earliest = orders.snapshot_manager().earliest_readable_id()
    if earliest is not None and position < earliest:
        return (f"the orders snapshots from {position} on expired before they were "
                f"read (the earliest is {earliest})")
    return None


def read_changes(orders: FileStoreTable, next_snapshot: int) -> tuple[pa.Table, int, list[int]]:
    """The changes of the orders snapshots from `next_snapshot` on (with `_row_kind`), the
    consumer's next snapshot after them, and the snapshots that had changes."""
    builder = (orders.new_stream_read_builder().with_consumer_id(CONSUMER_ID)
               .with_include_row_kind().with_projection(CHANGE_COLUMNS))
    scan, read = builder.new_streaming_scan(), builder.new_read()
    scan.restore(next_snapshot)
    parts, snapshots = [], []
    while True:
        plan = scan.plan()
        if plan.snapshot_id is None:
            break
        snapshots.append(plan.snapshot_id)
        if plan.splits():
            parts.append(read.to_arrow(plan.splits()))
    after = scan.checkpoint() or next_snapshot
    empty = pa.schema([pa.field(revenue.ROW_KIND, pa.string())]).empty_table()
    changes = pa.concat_tables(parts, promote_options="default") if parts else empty
    return changes, after, snapshots


@dg.asset(
    key=keys.DAILY_REVENUE,
    # Unpartitioned, one run anyway; the policy lets `dagster asset materialize --partition-range`
    # select it together with the daily assets (the CLI requires it of every selected asset).
    backfill_policy=SINGLE_RUN,
    deps=[keys.LSM_PUBLISH],
    pool=table_pool("shop.daily_revenue"),
    group_name="downstream",
    kinds={"paimon"},
    # eager, except that it does not wait for every daily partition of lsm_publish (the window
    # is never complete): a publish of any day is new orders to follow.
    automation_condition=dg.AutomationCondition.eager().without(~dg.AutomationCondition.any_deps_missing()),
    description="Revenue and order counts per day and status (aggregation merge engine), from the "
                "orders table's lookup changelog since the last run, written into the run's audit "
                "branch of shop.daily_revenue (readers see it once daily_revenue_publish published "
                "it): consumer 'daily_revenue' is the cursor, and keeps the snapshots it has not "
                "read from expiry.",
)
def daily_revenue(context: dg.AssetExecutionContext, lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Write the orders' changes since the consumer's position into the run's audit branch of the
    revenue table (a full recompute as an OVERWRITE when the position cannot be continued from)."""
    orders = lakehouse.get_or_create_table()
    if orders.options.bucket == POSTPONE_BUCKET:
        context.log.warning(f"{lakehouse.table} is a postpone-bucket table: it keeps no changelog to follow")
        return dg.MaterializeResult(metadata={"mode": "not maintained (postpone-bucket table, no changelog)",
                                              "changes": 0})
    target = revenue.get_or_create(lakehouse.catalog(), revenue_table_name(lakehouse))
    for gone in wap.discard_finished(target, run_is_running(context.instance)):
        context.log.info(f"discarded audit branch {gone} of a finished run")
    consumers = orders.consumer_manager()
    consumer = consumers.consumer(CONSUMER_ID)
    committed = _last_committed(target)
    if committed is not None and (consumer is None or consumer.next_snapshot < committed):
        # The last publish fast-forwarded main to these changes, then died before moving the consumer.
        context.log.warning(f"consumer {CONSUMER_ID} was behind its last commit: moved to {committed}")
        consumers.reset_consumer(CONSUMER_ID, committed)
        consumer = consumers.consumer(CONSUMER_ID)
    latest = orders.latest_snapshot()
    rebuild = cannot_continue(orders, consumer.next_snapshot if consumer is not None else None, target)
    if rebuild is None and consumer is not None and audit_failed_at(context.instance, consumer.next_snapshot):
        rebuild = (f"the last audits of the changes from orders snapshot {consumer.next_snapshot} failed "
                   f"{FAILED_AUDITS_BEFORE_RECOMPUTE} times in a row (adding them again fails the same way)")
    if rebuild is not None:
        context.log.warning(f"daily_revenue is recomputed in full: {rebuild}")
    if consumer is None or rebuild is not None:
        if latest is None:
            return dg.MaterializeResult(metadata={"mode": "nothing yet", "changes": 0})
        rows = revenue.read_all(orders, latest.id).select(CHANGE_COLUMNS)
        changes = rows.append_column(revenue.ROW_KIND, pa.array(["+I"] * rows.num_rows, pa.string()))
        start, after, snapshots = latest.id, latest.id + 1, [latest.id]
        mode = "full (first run)" if rebuild is None else f"full (recomputed: {rebuild})"
    else:
        start = consumer.next_snapshot
        changes, after, snapshots = read_changes(orders, start)
        mode = "incremental"
    deltas = revenue.deltas(changes)
    # Main is never written here: the run's branch holds its commit until the audit passed.
    branch = wap.open_audit_branch(target, context.run.run_id)
    if mode.startswith("full"):
        # The aggregate replaces what the table holds (an OVERWRITE): a recompute must not add
        # to sums counted from changes that are gone. Its identifier may be lower than the last
        # one (after a rollback): the builder is not restored, so it is not taken as committed.
        builder = branch.new_batch_write_builder().overwrite()
        builder.commit_user = CONSUMER_ID
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(deltas)
        commit.commit(write.prepare_commit(), after)
    elif deltas.num_rows:
        builder = branch.new_stream_write_builder().with_commit_user(CONSUMER_ID)
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(deltas)
        commit.commit(write.prepare_commit(after), after)
    # The consumer stays where it is: daily_revenue_publish moves it once main holds these sums.
    by_kind = revenue.counts_by_kind(changes)
    branch = target.branch_table(branch.branch)  # re-opened: its latest snapshot
    groups = revenue.live_groups(revenue.read_all(branch))
    metadata: dict[str, Any] = {
        "mode": mode,
        "audit_branch": branch.branch,
        "branch_base_snapshot": wap.branch_base(target, branch.branch),
        "first_snapshot": start if snapshots else 0,
        "last_snapshot": after - 1,
        "snapshots_with_changes": len(snapshots),
        "snapshot_range": f"{start}..{after - 1}" if after > start else "none (no new snapshot)",
        "consumer_before": consumer.next_snapshot if consumer is not None else 0,
        "consumer_next_snapshot": after,
        "changes": changes.num_rows,
        **{f"changes_{k}": n for k, n in zip(("insert", "update_before", "update_after", "delete"),
                                             by_kind.values(), strict=True)},
        "changes_per_row_kind": dg.MetadataValue.json(by_kind),
        "groups_changed": deltas.num_rows,
        "dagster/row_count": groups.num_rows,
        "total_orders": int(sum(groups.column(revenue.ORDERS).to_pylist())),
        "revenue_snapshot_id": getattr(branch.latest_snapshot(), "id", 0),
    }
    context.log.info(f"{mode}: snapshots {metadata['snapshot_range']}, {changes.num_rows:,} changes {by_kind}, "
                     f"{deltas.num_rows} groups changed, on branch {branch.branch}; published after the audit")
    return dg.MaterializeResult(metadata=metadata)
