"""Where a streaming read starts: one definition for the Python stream (StreamingTableScan) and
Spark's Structured Streaming source (spark/changes.py), from the table's options as stored or
given to the handle (`consumer-id`, `consumer.ignore-progress`, `scan.mode`, `scan.snapshot-id`,
`scan.timestamp-millis`), as Paimon's starting scanners decide it:

  1. a consumer's recorded next snapshot, unless `consumer.ignore-progress`;
  2. `scan.mode`: `latest-full` (the default) the latest snapshot in full, `latest` the changes
     after it, `from-snapshot` the changes from `scan.snapshot-id`, `from-snapshot-full` that
     snapshot in full, `from-timestamp` the changes after `scan.timestamp-millis`,
     `compacted-full` the latest compaction's snapshot in full.

A snapshot read in full is followed by its successors' changes. A start before the earliest
readable snapshot starts at the earliest one, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.options import (
    CONSUMER_ID,
    CONSUMER_IGNORE_PROGRESS,
    SCAN_SNAPSHOT_ID,
    SCAN_TIMESTAMP_MILLIS,
)
from lakehouse_engine.read.changes import CHANGELOG, changelog_producer
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.store.consumer_manager import Consumer, check_consumer_id
from lakehouse_engine.store.scan_start import latest_compacted, startup_mode

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)

__all__ = ["StreamStart", "full_read_splits", "stream_consumer_id", "stream_start"]


@dataclass(frozen=True)
class StreamStart:
    """Where a stream starts: `full` (a snapshot read in full first, every row as +I) then the
    changes from `next_snapshot` (= full.id + 1); without `full`, the changes from
    `next_snapshot`. `consumer` is set when the position is that consumer's."""

    next_snapshot: int
    full: Snapshot | None = None
    consumer: Consumer | None = None


def stream_consumer_id(table: FileStore, consumer_id: str | None = None) -> str | None:
    """The consumer a stream reads with: `consumer_id` when given, else the table's `consumer-id`
    option (stored or dynamic), checked as a file name."""
    consumer_id = consumer_id if consumer_id is not None else table.options.get(CONSUMER_ID)
    return check_consumer_id(consumer_id) if consumer_id is not None else None


def stream_start(table: FileStore, consumer_id: str | None) -> StreamStart | None:
    """Where a stream of `table` with consumer `consumer_id` (None: none) starts now; None while
    the snapshot a full start reads does not exist yet (ask again later). InvalidOptionError for
    a mode a stream cannot start from, or a mode without its option."""
    sm = table.snapshot_manager()
    opts = table.options
    if consumer_id is not None and not opts.get(CONSUMER_IGNORE_PROGRESS):
        consumer = table.consumer_manager().consumer(consumer_id)
        if consumer is not None:
            return StreamStart(_not_before_earliest(table, consumer.next_snapshot, "consumer"), None, consumer)
    mode = startup_mode(table)
    if mode == "latest-full":
        return _full(sm.latest_snapshot())
    if mode == "latest":
        latest = sm.latest_snapshot_id()
        return StreamStart(latest + 1 if latest is not None else 1)
    if mode == "compacted-full":
        return _full(latest_compacted(table) or sm.latest_snapshot())
    if mode in ("from-snapshot", "from-snapshot-full"):
        start = opts.get(SCAN_SNAPSHOT_ID)
        if start is None:
            raise InvalidOptionError(f"table {table.name}: scan.mode '{mode}' needs 'scan.snapshot-id' "
                                     f"(a streaming read cannot start from a tag)")
        start = _not_before_earliest(table, start, "scan.snapshot-id")
        if mode == "from-snapshot":
            return StreamStart(start)
        # A full read needs the snapshot, not its long-lived changelog: Paimon's
        # ContinuousFromSnapshotFullStartingScanner reads the earliest snapshot at least.
        earliest = sm.earliest_snapshot_id()
        return _full(sm.get_snapshot_by_id(max(start, earliest) if earliest is not None else start))
    if mode == "from-timestamp":
        millis = opts.get(SCAN_TIMESTAMP_MILLIS)
        if millis is None:
            raise InvalidOptionError(f"table {table.name}: scan.mode 'from-timestamp' needs "
                                     f"'scan.timestamp-millis'")
        # Long-lived changelogs reach further back than the snapshots (Paimon's
        # earlierThanTimeMills with startFromChangelog).
        before = sm.earlier_or_equal_time_mills(millis) or sm.long_lived_changelog_at_or_before(millis)
        return StreamStart(before.id + 1 if before is not None else (sm.earliest_readable_id() or 1))
    raise InvalidOptionError(f"table {table.name}: scan.mode '{mode}' (also what 'incremental-between' "
                             f"and 'incremental-between-timestamp' ask for) is for batch reads, not for "
                             f"a streaming read")


def _full(snapshot: Snapshot | None) -> StreamStart | None:
    return StreamStart(snapshot.id + 1, snapshot) if snapshot is not None else None


def _not_before_earliest(table: FileStore, start: int, what: str) -> int:
    earliest = table.snapshot_manager().earliest_readable_id()
    if earliest is not None and start < earliest:
        log.warning("table %s: %s asks for snapshot %s, which has expired; reading from the "
                    "earliest, %s", table.name, what, start, earliest)
        return earliest
    return start


def full_read_splits(table: FileStore, snapshot: Snapshot, kind: str, predicate: Predicate | None = None,
                     bucket_filter: Callable[[int], bool] | None = None) -> list[DataSplit]:
    """The splits of a full read of `snapshot` that a stream whose later snapshots are read as
    `kind` starts with: followed by changelog, a `lookup` table's leave out level 0 and a
    `full-compaction` table's all but the top level, as Paimon's do (those rows arrive as
    changelog when a compaction takes them up); followed by deltas, every file."""
    scan = TableScan(table, predicate, snapshot.id)
    producer = changelog_producer(table) if kind == CHANGELOG else "none"
    top = table.options.num_levels - 1
    if producer == "lookup":
        scan.entry_filter = lambda e: e.file.level > 0 and (bucket_filter is None or bucket_filter(e.bucket))
    elif producer == "full-compaction":
        scan.entry_filter = lambda e: e.file.level == top and (bucket_filter is None or bucket_filter(e.bucket))
    elif bucket_filter is not None:
        scan.entry_filter = lambda e: bucket_filter(e.bucket)
    return scan.plan().splits()
