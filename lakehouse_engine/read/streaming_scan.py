"""StreamingTableScan: a table's changes as a stream of plans, one per snapshot that changed rows.

Where it starts is read/stream_start.py (shared with Spark's streaming source): a consumer's
recorded next snapshot (`with_consumer_id` / `consumer-id`), unless `consumer.ignore-progress`;
else `scan.mode` (`latest-full`, the default, reads the latest snapshot in full first).
After that each plan is the changes of the next snapshot that has some (`read.changes`), read
from its long-lived changelog once the snapshot has expired (`changelog.*` retention): skipped
snapshots (compactions of a table without a changelog producer, overwrites) yield nothing. A full
first read of a table with a `lookup` (or `full-compaction`) producer leaves out the files whose
rows its changelog will deliver, as Paimon does (level 0, or all but the top level): a level-0 file
gives its `lookup` changelog when a compaction takes it up (write/level0_changelog.py).

The position is `checkpoint()` (the next snapshot id); a consumer records it in
`consumer/consumer-<id>` once the plan before it has been processed (pypaimon's at-least-once
rule: `stream()` writes it when the caller asks for the next plan).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import TYPE_CHECKING

from lakehouse_engine.errors import InvalidOptionError, SnapshotNotExistError, UnsupportedError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.read.changes import (
    ChangeScan,
    as_store,
    follow_up_kind,
    has_changes,
)
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.scan import Plan
from lakehouse_engine.read.stream_start import full_read_splits, stream_consumer_id, stream_start
from lakehouse_engine.store.consumer_manager import Consumer

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.table import FileStoreTable


def check_stream_options(table: FileStore) -> None:
    """UnsupportedError naming a table option a streaming read of this engine (Python or Spark)
    would not apply: `streaming-read-overwrite` = true, `scan.bounded.watermark`."""
    raw = table.options.raw
    if raw.get("streaming-read-overwrite", "false").strip().lower() != "false" or "scan.bounded.watermark" in raw:
        key = "scan.bounded.watermark" if "scan.bounded.watermark" in raw else "streaming-read-overwrite"
        raise UnsupportedError(f"table {table.name}: option '{key}' = {raw[key]!r} is not applied by "
                               f"this engine's streaming read (it skips overwrites and never ends); "
                               f"remove it")


class StreamingTableScan:
    """Plans a table's changes snapshot by snapshot (pypaimon's AsyncStreamingTableScan, with
    Java's `plan` / `checkpoint` / `restore` / `notify_checkpoint_complete` too)."""

    def __init__(self, table: FileStore | FileStoreTable, predicate: Predicate | None = None,
                 poll_interval_ms: int = 1000, bucket_filter: Callable[[int], bool] | None = None,
                 consumer_id: str | None = None):
        self.table = table = as_store(table)
        self.predicate = predicate
        if isinstance(poll_interval_ms, bool) or not isinstance(poll_interval_ms, int) or poll_interval_ms < 0:
            raise InvalidOptionError(f"poll interval must be a number of milliseconds >= 0, got {poll_interval_ms!r}")
        self.poll_interval = poll_interval_ms / 1000.0
        self.bucket_filter = bucket_filter
        self.consumer_id = stream_consumer_id(table, consumer_id)
        self._consumers = table.consumer_manager() if self.consumer_id is not None else None
        check_stream_options(table)
        self.kind = follow_up_kind(table)
        self._changes = ChangeScan(table, predicate, bucket_filter)
        #: The id of the next snapshot whose changes are read; None before the first plan.
        self.next_snapshot_id: int | None = None
        #: The newest snapshot this read (or the consumer it started from) has read: a table
        #: whose latest snapshot is older was rolled back under the read.
        self._read_up_to: int | None = None
        #: The commit time of that snapshot when this read read it (None: read by a consumer).
        self._read_up_to_millis: int | None = None
        self._pending_consumer: int | None = None

    # ---- Java's shape: one step at a time -----------------------------------------------
    def plan(self) -> Plan:
        """The next plan: the first plan as the start mode says, then the changes of the next
        snapshot that has some; an empty plan when there is nothing new yet."""
        if self.next_snapshot_id is None:
            return self._first_plan()
        sm = self.table.snapshot_manager()
        self._check_history_kept()
        while True:
            # An expired snapshot is read from its long-lived changelog (`changelog.*` retention).
            snapshot = sm.snapshot_or_changelog(self.next_snapshot_id)
            if snapshot is None:
                earliest = sm.earliest_snapshot_id()
                if earliest is not None and earliest > self.next_snapshot_id:
                    raise SnapshotNotExistError(
                        f"streaming read of table {self.table.name}: snapshot {self.next_snapshot_id} "
                        f"has expired (earliest is {earliest}) before its changes were read; keep "
                        f"snapshots (or, with 'changelog.num-retained.*' / 'changelog.time-retained', "
                        f"their changelog) longer or read with a consumer id, which expiry respects")
                self._check_not_rolled_back()
                return Plan([], None)
            self.next_snapshot_id += 1
            self._read_up_to, self._read_up_to_millis = snapshot.id, snapshot.time_millis
            if has_changes(snapshot, self.kind):
                return Plan(self._changes.plan_snapshot(snapshot, self.kind), snapshot)

    def checkpoint(self) -> int | None:
        """The position to restore from: the next snapshot id (None before the first plan)."""
        return self.next_snapshot_id

    def restore(self, next_snapshot_id: int | None) -> None:
        """Continue from `next_snapshot_id` (a `checkpoint()` value)."""
        self.next_snapshot_id = next_snapshot_id
        self._read_up_to = next_snapshot_id - 1 if next_snapshot_id else None
        self._read_up_to_millis = None

    def _check_history_kept(self) -> None:
        """Raise when the snapshot this read read last is now another one (the table was rolled
        back and committed to again, or fast-forwarded to a branch): the changes between were
        never read, and the rows of the replaced history stay read."""
        if self._read_up_to is None or self._read_up_to_millis is None:
            return
        now = self.table.snapshot_manager().snapshot_or_changelog(self._read_up_to)
        if now is not None and now.time_millis != self._read_up_to_millis:
            who = f"consumer {self.consumer_id!r}" if self.consumer_id is not None else "this read"
            raise SnapshotNotExistError(
                f"streaming read of table {self.table.name}: snapshot {self._read_up_to}, read at "
                f"{self._read_up_to_millis} by {who}, is now another snapshot (committed at "
                f"{now.time_millis}): the table was rolled back and written again, or fast-forwarded "
                f"to a branch, after it was read; the snapshots rewritten since would be skipped. "
                f"Start the read again (reset the consumer) from a snapshot that exists")

    def _check_not_rolled_back(self) -> None:
        """Raise when the table's latest snapshot is older than one this read has read: a
        rollback removed it, and the commits that reuse its id would be read as if nothing
        happened (the rows rolled back stay read, the ids in between never are)."""
        if not self._read_up_to:
            return
        latest = self.table.snapshot_manager().latest_snapshot_id() or 0
        if latest == 0:
            raise SnapshotNotExistError(
                f"streaming read of table {self.table.name}: it has no snapshot any more (the table "
                f"or its branch was dropped, or emptied), but this read has read up to snapshot "
                f"{self._read_up_to}")
        if latest < self._read_up_to:
            raise SnapshotNotExistError(
                f"streaming read of table {self.table.name}: the table was rolled back to snapshot "
                f"{latest}, but this read (or the consumer it started from) has read up to snapshot "
                f"{self._read_up_to}; start the read again (reset its consumer) from a snapshot that "
                f"exists")

    def notify_checkpoint_complete(self, next_snapshot: int | None) -> None:
        """The plans before `next_snapshot` are processed: record it for the consumer, if any."""
        if next_snapshot is not None and self._consumers is not None and self.consumer_id is not None:
            # The commit time of the snapshot before it, when that is the one this read read last:
            # a stream restarted from the consumer checks it (a rollback-and-rewrite past it).
            millis = self._read_up_to_millis if next_snapshot - 1 == self._read_up_to else None
            self._consumers.reset_consumer(self.consumer_id, Consumer(next_snapshot, millis))

    # ---- pypaimon's shape: an endless stream of plans ----------------------------------------
    async def stream(self) -> AsyncGenerator[Plan, None]:
        """Yield a plan for each snapshot with changes, polling every `poll_interval_ms` for new
        ones; a consumer's position is recorded when the next plan is asked for."""
        while True:
            self._flush_consumer()
            started = self.next_snapshot_id is not None
            plan = self.plan()
            if plan.snapshot is not None:
                self._pending_consumer = self.next_snapshot_id
                yield plan
            elif started or self.next_snapshot_id is None:
                await asyncio.sleep(self.poll_interval)
            # (a first plan that only set the position, `latest`, polls again at once)

    def stream_sync(self) -> Iterator[Plan]:
        """`stream()` for code without an event loop: a blocking iterator of plans."""
        loop = asyncio.new_event_loop()
        agen = self.stream()
        try:
            while True:
                try:
                    yield loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            loop.run_until_complete(agen.aclose())
            loop.close()

    def _flush_consumer(self) -> None:
        if self._pending_consumer is not None:
            self.notify_checkpoint_complete(self._pending_consumer)
            self._pending_consumer = None

    # ---- the first plan ---------------------------------------------------------------
    def _first_plan(self) -> Plan:
        start = stream_start(self.table, self.consumer_id if self._consumers is not None else None)
        if start is None:
            return Plan([], None)  # the snapshot a full start reads is not committed yet: wait for it
        if start.full is not None:
            snapshot = start.full
            splits = full_read_splits(self.table, snapshot, self.kind, self.predicate, self.bucket_filter)
            self.next_snapshot_id = start.next_snapshot
            self._read_up_to, self._read_up_to_millis = snapshot.id, snapshot.time_millis
            return Plan(splits, snapshot)
        self.next_snapshot_id = start.next_snapshot
        if start.consumer is not None:
            self._read_up_to = start.consumer.next_snapshot - 1
            # Recorded by our streams (not by Paimon's or pypaimon's): `plan` checks that the
            # snapshot the consumer read last is still the one it read.
            self._read_up_to_millis = start.consumer.last_snapshot_millis
        return self.plan()


def wait_for_snapshot(table: FileStore, snapshot_id: int, timeout_s: float = 30.0) -> Snapshot:
    """Block until snapshot `snapshot_id` exists (tests and tools); SnapshotNotExistError on timeout."""
    deadline = time.monotonic() + timeout_s
    sm = table.snapshot_manager()
    while True:
        s = sm.get_snapshot_by_id(snapshot_id)
        if s is not None:
            return s
        if time.monotonic() > deadline:
            raise SnapshotNotExistError(f"snapshot {snapshot_id} of table {table.name} did not appear "
                                        f"within {timeout_s}s")
        time.sleep(0.05)
