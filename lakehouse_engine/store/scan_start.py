"""Where a read starts, from `scan.mode` (Paimon's starting scanners): the mode as resolved, the
latest compaction's snapshot, and the snapshot a batch read sees under a time or compaction mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.format.snapshot import Snapshot, is_full_compacted_identifier
from lakehouse_engine.options import (
    CHANGELOG_PRODUCER,
    FULL_COMPACTION_DELTA_COMMITS,
    INCREMENTAL_BETWEEN,
    INCREMENTAL_BETWEEN_TIMESTAMP,
    SCAN_MODE,
    SCAN_SNAPSHOT_ID,
    SCAN_TAG_NAME,
    SCAN_TIMESTAMP_MILLIS,
)

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def startup_mode(store: FileStore) -> str:
    """The table's `scan.mode`, `default` resolved as Paimon resolves it."""
    opts = store.options
    mode = opts.require(SCAN_MODE)
    if mode == "full":
        return "latest-full"
    if mode != "default":
        return mode
    if opts.get(SCAN_TIMESTAMP_MILLIS) is not None:
        return "from-timestamp"
    if opts.get(SCAN_SNAPSHOT_ID) is not None or opts.get(SCAN_TAG_NAME) is not None:
        return "from-snapshot"
    if opts.get(INCREMENTAL_BETWEEN) is not None or opts.get(INCREMENTAL_BETWEEN_TIMESTAMP) is not None:
        return "incremental"
    return "latest-full"


def latest_compacted(store: FileStore) -> Snapshot | None:
    """The latest COMPACT snapshot; a full compaction's (commit identifier a multiple of
    `full-compaction.delta-commits`, or a batch one) when the table schedules full compactions
    or has the full-compaction changelog producer (Paimon's FullCompactedStartingScanner)."""
    sm = store.snapshot_manager()
    delta_commits = store.options.get(FULL_COMPACTION_DELTA_COMMITS)
    full_only = store.options.require(CHANGELOG_PRODUCER) == "full-compaction" or delta_commits is not None
    latest, earliest = sm.latest_snapshot_id(), sm.earliest_snapshot_id()
    if latest is None or earliest is None:
        return None
    for sid in range(latest, earliest - 1, -1):
        s = sm.get_snapshot_by_id(sid)
        if s is None or s.commit_kind != "COMPACT":
            continue
        if not full_only or is_full_compacted_identifier(s.commit_identifier, delta_commits or 1):
            return s
    return None


def batch_snapshot(store: FileStore) -> tuple[bool, Snapshot | None]:
    """(chosen, snapshot): the snapshot a batch read sees under `scan.mode` from-timestamp (the
    last at or before `scan.timestamp-millis`; None before the first) or compacted-full (the
    latest compaction's, else the latest); chosen is False for other modes."""
    mode = startup_mode(store)
    if mode == "from-timestamp":
        millis = store.options.get(SCAN_TIMESTAMP_MILLIS)
        if millis is None:
            raise InvalidOptionError(f"table {store.name}: scan.mode 'from-timestamp' needs 'scan.timestamp-millis'")
        return True, store.snapshot_manager().earlier_or_equal_time_mills(millis)
    if mode == "compacted-full":
        return True, latest_compacted(store) or store.snapshot_manager().latest_snapshot()
    return False, None
