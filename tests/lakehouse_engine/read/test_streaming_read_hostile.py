"""Streaming reads against a table that moves under them: rolled back below what a read (or its
consumer) has read, consumers reset or deleted while a read runs, two reads sharing a consumer,
and bucket selections given the wrong thing."""

from __future__ import annotations

import time

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError, SnapshotNotExistError, TableNotExistError
from tests.lakehouse_engine.read.changes_helpers import changes, keyed_table, put


def test_a_rollback_below_what_a_stream_read_raises_instead_of_skipping_the_new_commits(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    builder = t.new_stream_read_builder().with_include_row_kind()
    scan = builder.new_streaming_scan()
    assert scan.plan().snapshot_id == 1
    put(t, (2, "b", "+I"))
    put(t, (3, "c", "+I"))
    assert [scan.plan().snapshot_id for _ in range(3)] == [2, 3, None]
    t.rollback_to(1)
    put(t, (4, "d", "+I"))  # snapshot 2 again
    # Before: the read waited for snapshot 4 and never read this commit (or saw 2, 3 undone).
    with pytest.raises(SnapshotNotExistError, match=r"rolled back to snapshot 2, but this read \(or the consumer "
                                                    r"it started from\) has read up to snapshot 3"):
        scan.plan()


def test_a_consumer_ahead_of_a_rolled_back_table_raises_at_the_start(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    for i in range(4):
        put(t, (i, "v", "+I"))
    t.consumer_manager().reset_consumer("etl", 5)
    t.rollback_to(2)
    scan = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    with pytest.raises(SnapshotNotExistError, match="rolled back to snapshot 2"):
        scan.plan()
    # A consumer at the latest + 1 (read everything) is not a rollback: it waits.
    t.consumer_manager().reset_consumer("etl", 3)
    scan = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    assert scan.plan().snapshot_id is None and scan.checkpoint() == 3


def test_reset_and_delete_of_a_consumer_while_a_stream_reads_it(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input"})
    put(t, (1, "a", "+I"))
    builder = t.new_stream_read_builder().with_consumer_id("etl").with_include_row_kind().with_poll_interval_ms(1)
    read = builder.new_read()
    stream = builder.new_streaming_scan().stream_sync()
    assert changes(read.to_arrow(next(stream).splits())) == [("+I", 1, "a")]
    put(t, (2, "b", "+I"))
    assert next(stream).snapshot_id == 2
    cm = t.consumer_manager()
    assert cm.consumers() == {"etl": 2}  # asking for plan 2 recorded plan 1 as processed
    # Deleted while the stream runs: the stream keeps its own position and writes the consumer
    # again at its next step (the file tracks the running read, as in Paimon).
    cm.delete_consumer("etl")
    put(t, (3, "c", "+I"))
    assert next(stream).snapshot_id == 3 and cm.consumers() == {"etl": 3}
    # Reset while the stream runs: the running stream goes on from its position; a new stream
    # with the consumer starts where it was reset to.
    cm.reset_consumer("etl", 1)
    again = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    assert again.plan().snapshot_id == 1


def test_two_streams_with_one_consumer_each_read_everything_and_the_consumer_keeps_the_slower(
        catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input"})
    put(t, (1, "a", "+I"))
    fast = t.new_stream_read_builder().with_consumer_id("shared").new_streaming_scan()
    slow = t.new_stream_read_builder().with_consumer_id("shared").new_streaming_scan()
    for i in range(2, 5):
        put(t, (i, "v", "+I"))
    fast_ids = [fast.plan().snapshot_id for _ in range(4)]
    fast.notify_checkpoint_complete(fast.checkpoint())
    assert fast_ids == [4, None, None, None]  # latest-full: all of snapshot 4, then nothing new
    # The second stream started later, from the consumer the first one moved: it does not read
    # twice what the first one committed.
    assert slow.plan().snapshot_id is None and slow.checkpoint() == 5


@pytest.mark.parametrize("bad", ["01", 3, [0, "1"], [None]])
def test_with_buckets_names_what_is_not_a_list_of_bucket_ids(catalog: Catalog, bad: object) -> None:
    t = keyed_table(catalog)
    with pytest.raises(InvalidOptionError, match="list of bucket ids"):
        t.new_stream_read_builder().with_buckets(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="function of the bucket id"):
        t.new_stream_read_builder().with_bucket_filter(3)  # type: ignore[arg-type]


def test_with_buckets_on_dynamic_and_postpone_tables_reads_the_selected_buckets(catalog: Catalog) -> None:
    dynamic = keyed_table(catalog, "d", **{"bucket": "-1", "changelog-producer": "input"})
    put(dynamic, (1, "a", "+I"), (2, "b", "+I"))
    builder = dynamic.new_stream_read_builder().with_buckets([0]).with_include_row_kind()
    assert changes(builder.new_read().to_arrow(builder.new_streaming_scan().plan().splits())) == [
        ("+I", 1, "a"), ("+I", 2, "b")]
    assert dynamic.new_stream_read_builder().with_buckets([5]).new_streaming_scan().plan().splits() == []
    postpone = keyed_table(catalog, "p", **{"bucket": "-2", "changelog-producer": "lookup"})
    put(postpone, (1, "a", "+I"), (2, "b", "+I"))
    scans = [postpone.new_stream_read_builder().with_buckets([b]).with_include_row_kind() for b in (0, 1)]
    streams = [(b.new_streaming_scan(), b.new_read()) for b in scans]
    for scan, _ in streams:
        assert scan.plan().splits() == []  # the rows wait in bucket-postpone: nothing readable yet
    postpone.compact_postpone()
    got = []
    for scan, read in streams:
        plan = scan.plan()
        while plan.snapshot_id is not None and not plan.splits():
            plan = scan.plan()
        got += changes(read.to_arrow(plan.splits()))
    assert sorted(got) == [("+I", 1, "a"), ("+I", 2, "b")]


def test_a_branch_streams_by_name_or_option_with_its_own_consumers(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "lookup", "deletion-vectors.enabled": "true"})
    put(t, (1, "a", "+I"), (2, "b", "+I"))
    t.create_tag("t1")
    put(t, (1, "a-main", "+U"))
    t.create_branch("dev", "t1")
    dev = catalog.get_table("db.t$branch_dev")
    put(dev, (2, "b-dev", "+U"), (3, "c", "+I"))
    for cid, handle in (("by-name", dev), ("by-option", t.copy({"branch": "dev"}))):
        builder = handle.new_stream_read_builder().with_consumer_id(cid).with_include_row_kind()
        scan = builder.new_streaming_scan()
        plan = scan.plan()
        assert changes(builder.new_read().to_arrow(plan.splits())) == [("+I", 1, "a"), ("+I", 2, "b-dev"),
                                                                       ("+I", 3, "c")]
        scan.notify_checkpoint_complete(scan.checkpoint())
    # The consumer lives in the branch (branch/branch-dev/consumer/), main has none.
    assert dev.consumer_manager().consumers() == {"by-name": plan.snapshot_id + 1, "by-option": plan.snapshot_id + 1}
    assert t.consumer_manager().consumers() == {}


def test_a_stream_on_a_dropped_branch_neither_brings_it_back_nor_reads_on(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input"})
    put(t, (1, "a", "+I"))
    t.create_tag("t1")
    t.create_branch("dev", "t1")
    dev = catalog.get_table("db.t$branch_dev")
    put(dev, (2, "b", "+I"))
    scan = dev.new_stream_read_builder().with_consumer_id("c").new_streaming_scan()
    assert scan.plan().snapshot_id == 2
    t.drop_branch("dev")
    # Before: moving the consumer wrote branch/branch-dev/consumer/consumer-c, a branch that was
    # then listed but could neither be opened nor created again.
    with pytest.raises(TableNotExistError, match="no longer exists"):
        scan.notify_checkpoint_complete(scan.checkpoint())
    with pytest.raises(SnapshotNotExistError, match="has no snapshot any more"):
        scan.plan()
    assert t.branch_manager().branches() == []
    t.create_branch("dev")


def test_a_rollback_written_again_past_the_position_or_a_fast_forward_raises_for_a_running_stream(
        catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    scan = t.new_stream_read_builder().new_streaming_scan()
    assert scan.plan().snapshot_id == 1
    put(t, (2, "b", "+I"))
    assert [scan.plan().snapshot_id for _ in range(2)] == [2, None]
    t.rollback_to(1)
    time.sleep(0.01)  # a new commit time
    for i in range(3):
        put(t, (10 + i, "x", "+I"))  # snapshots 2, 3, 4: the ids look like a normal stream's
    # Before: the read went on with snapshot 3, never reading the new 2 and keeping the old 2's b.
    with pytest.raises(SnapshotNotExistError, match="snapshot 2, read at .* is now another snapshot"):
        scan.plan()
    # Fast-forward: main becomes a branch with more snapshots past a running stream's position.
    main = keyed_table(catalog, "m")
    put(main, (1, "a", "+I"))
    main.create_tag("t1")
    main.create_branch("dev", "t1")
    dev = catalog.get_table("db.m$branch_dev")
    for i in range(3):
        put(dev, (20 + i, "y", "+I"))
    put(main, (2, "b", "+I"))
    stream = main.new_stream_read_builder().new_streaming_scan()
    assert stream.plan().snapshot_id == 2
    main.fast_forward("dev")
    with pytest.raises(SnapshotNotExistError, match="fast-forwarded to a branch"):
        stream.plan()


def test_a_stream_restarted_from_its_consumer_after_a_rollback_written_again_past_it_raises(
        catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input"})
    put(t, (1, "a", "+I"))
    builder = t.new_stream_read_builder().with_consumer_id("etl").with_poll_interval_ms(1)
    stream = builder.new_streaming_scan().stream_sync()
    assert next(stream).snapshot_id == 1
    put(t, (2, "b", "+I"))
    put(t, (3, "c", "+I"))
    assert next(stream).snapshot_id == 2
    assert next(stream).snapshot_id == 3
    stream.close()
    assert t.consumer_manager().consumers() == {"etl": 3}  # plan 3 was never asked past
    t.rollback_to(1)
    time.sleep(0.01)  # a new commit time
    for i in range(3):
        put(t, (10 + i, "x", "+I"))  # snapshots 2, 3, 4: 2 is rewritten under the consumer
    # Before: the restarted stream read snapshot 3 on, never reading the new 2 (key 10) and
    # keeping the old 2's b.
    scan = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    with pytest.raises(SnapshotNotExistError, match="snapshot 2, read at .* by consumer 'etl', is now another"):
        scan.plan()
    # The consumer file stays Paimon's, with one more field Java and pypaimon ignore.
    consumer = t.consumer_manager().consumer("etl")
    assert consumer is not None and consumer.next_snapshot == 3 and consumer.last_snapshot_millis is not None
    # Reset (as the error says): the stream reads from there, and a consumer that was not
    # rewritten under starts as before.
    t.consumer_manager().reset_consumer("etl", 2)
    scan = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    assert scan.plan().snapshot_id == 2


def test_a_consumer_restart_without_a_rewrite_checks_nothing_away(catalog: Catalog) -> None:
    # The same restart with the history intact (and through an expiry of the snapshot the
    # consumer read last, which leaves nothing to compare) reads on.
    t = keyed_table(catalog, **{"changelog-producer": "input"})
    put(t, (1, "a", "+I"))
    put(t, (2, "b", "+I"))
    scan = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    scan.restore(1)
    assert scan.plan().snapshot_id == 1
    scan.notify_checkpoint_complete(scan.checkpoint())
    assert t.consumer_manager().consumer("etl").last_snapshot_millis == t.snapshot(1).time_millis
    put(t, (3, "c", "+I"))
    again = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    assert [again.plan().snapshot_id for _ in range(3)] == [2, 3, None]
    t.expire_snapshots(retain_max=1, retain_min=1)
    again = t.new_stream_read_builder().with_consumer_id("etl").new_streaming_scan()
    assert again.plan().snapshot_id == 2
