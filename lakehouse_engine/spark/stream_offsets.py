"""The offsets of the `lakehouse-changes` stream (spark/changes.py): `{"next_snapshot": N}`, the
snapshots before N are read (`snapshot_millis`: the commit time of snapshot N-1, to tell a
rewritten history); `{"next_snapshot": 0}` the initial offset, where the stream starts is not
decided yet; the end offset of the micro-batch that decided it records the start under `"start"`
(`{"next_snapshot": S, "scan_snapshot": true}`: S in full first, or `{"next_snapshot": N}`)."""

from __future__ import annotations

from typing import Any

from lakehouse_engine.errors import SnapshotNotExistError
from lakehouse_engine.table import FileStoreTable

CHANGES_FORMAT = "lakehouse-changes"
#: The initial offset: where the stream starts is not decided yet.
UNDECIDED: dict[str, int] = {"next_snapshot": 0}


def latest_offset_after(table: FileStoreTable, start: dict) -> dict:
    """The offset after the latest snapshot, for a micro-batch from `start`: SnapshotNotExistError
    when the table was rolled back below `start` or rewritten past it (`check_not_rewritten`);
    `start` itself when nothing was committed since."""
    latest = table.snapshot_manager().latest_snapshot_id() or 0
    if start.get("scan_snapshot"):
        if latest < int(start["next_snapshot"]):
            raise SnapshotNotExistError(
                f"format('{CHANGES_FORMAT}') of table {table.name}: the table was rolled back to "
                f"snapshot {latest} before the query read snapshot {start['next_snapshot']}, where it "
                f"starts; start it again from a new checkpoint")
    else:
        check_not_rewritten(table, start, latest)
    if latest == 0:
        return {"next_snapshot": 1}
    snapshot = table.snapshot_manager().snapshot_or_changelog(latest)
    offset: dict[str, Any] = {"next_snapshot": latest + 1}
    if snapshot is not None:
        offset["snapshot_millis"] = snapshot.time_millis
    if offset == {k: v for k, v in start.items() if k != "start"}:
        return start  # nothing new: the same offset, or Spark would run an empty micro-batch
    return offset


def batch_start(start: dict, end: dict) -> dict:
    """Where the micro-batch from `start` to `end` starts reading: the start recorded in `end`
    when the micro-batch is the one that decided it."""
    if int(start["next_snapshot"]) == 0 and isinstance(end.get("start"), dict):
        return dict(end["start"])
    return start


def check_not_rewritten(table: FileStoreTable, start: dict, latest: int) -> None:
    """SnapshotNotExistError when the table was rolled back below what the query has read, or the
    snapshot it read last is now another one: Spark reads only offsets after the ones it has, so
    the commits that reuse the ids it read would be skipped."""
    if latest + 1 < int(start["next_snapshot"]):
        raise SnapshotNotExistError(
            f"format('{CHANGES_FORMAT}') of table {table.name}: the table was rolled back to "
            f"snapshot {latest}, but the query has read up to snapshot {int(start['next_snapshot']) - 1}; "
            f"start it again from a new checkpoint (and reset its consumer)")
    read_last = start.get("snapshot_millis")
    if read_last is not None:
        # Rolled back and written again past it, or fast-forwarded to a branch: what came
        # between would never be read.
        sid = int(start["next_snapshot"]) - 1
        now = table.snapshot_manager().snapshot_or_changelog(sid)
        if now is not None and now.time_millis != int(read_last):
            raise SnapshotNotExistError(
                f"format('{CHANGES_FORMAT}') of table {table.name}: snapshot {sid}, which the query "
                f"read, is now another snapshot (the table was rolled back and written again, or "
                f"fast-forwarded to a branch); start it again from a new checkpoint (and reset its "
                f"consumer)")
