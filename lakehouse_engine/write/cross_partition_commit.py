"""The commit check of cross-partition upsert: a key lives in one partition and bucket.

A cross-partition writer routes each key where its global index, read from the snapshot the write
started at, says the key lives (`bucket.cross_partition`). Another writer that committed the same
key since may have put it elsewhere: a move to another partition, or a new key placed in another
partition or bucket. This commit's rows would then be routed on stale ground, and the key would
end up in two places (each bucket merges on its own, so both rows read). Re-sequencing cannot help:
it orders the records of one bucket. So an APPEND commit whose new files share a key with files
that other writers committed since its index was read, in another partition or bucket, conflicts;
the writer writes again with a fresh index. An OVERWRITE routes its keys the same way and is
checked the same way, except in the partitions it replaces (whatever others put there goes).
Writers of a key in the same bucket are not refused (re-sequencing orders them), nor are the
writer's own earlier commits (its index holds its own moves) or compactions (which move no key
between buckets).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_engine.errors import CommitConflictError, LakehouseError, SnapshotNotExistError
from lakehouse_engine.format.manifest_entries import DataFileMeta, ManifestEntry
from lakehouse_engine.format.snapshot import CommitKind, Snapshot
from lakehouse_engine.mergetree.key_range import files_meeting_keys, key_span
from lakehouse_engine.schema import BucketMode
from lakehouse_engine.write.commit_message import CommitMessage

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def check_keys_stay_put(table: FileStore, messages: Sequence[CommitMessage], latest: Snapshot | None,
                        commit_user: str | None, replaced: Callable[[bytes], bool] | None = None) -> None:
    """CommitConflictError when another writer committed a key of `messages`' new files, since
    their global index was read, into another partition or bucket than the message's.

    Args:
        commit_user: this commit's user; its own snapshots are not another writer's.
        replaced: an overwrite's test of the partitions (binary rows) it replaces: what others
            committed there goes with them, so it shares no key with this commit.
    """
    routed = [m for m in messages if m.route_snapshot is not None and m.new_files]
    if not routed or latest is None:
        return
    since = min(m.route_snapshot for m in routed if m.route_snapshot is not None)
    if since >= latest.id:
        return
    mio = table.manifest_io()
    snapshots = table.snapshot_manager()
    added: list[tuple[int, ManifestEntry]] = []
    for sid in range(since + 1, latest.id + 1):
        try:
            s = snapshots.snapshot(sid)
        except SnapshotNotExistError:
            raise _conflict(table, f"snapshot {sid}, committed since this write read its index, expired "
                                   f"meanwhile, so where it put keys is unknown") from None
        if s.commit_kind != CommitKind.COMPACT and s.commit_user != commit_user:
            added += [(sid, e) for e in mio.added_entries(s) if replaced is None or not replaced(e.partition)]
    if not added:
        return
    key_names = list(table.schema.trimmed_primary_keys)
    key_types = table.schema.types_of(key_names)
    keys = _KeyReader(table, key_names)
    for m in routed:
        assert m.route_snapshot is not None
        span = key_span(m.new_files, key_types)
        theirs = [e for sid, e in added if sid > m.route_snapshot and (e.partition, e.bucket) != (m.partition, m.bucket)
                  and files_meeting_keys([e.file], key_types, span)]
        if not theirs:
            continue
        ours = keys.of([(m.partition, m.bucket, f) for f in m.new_files])
        other = keys.of([(e.partition, e.bucket, e.file) for e in theirs])
        if ours is None or other is None or ours.join(other, key_names, join_type="inner").num_rows:
            path = table.partition_codec().from_binary(m.partition).path_string() or "(none)"
            raise _conflict(table, f"another writer committed keys of this write's partition {path}, "
                                   f"bucket {m.bucket} into another partition or bucket since this "
                                   f"write read where keys live")


def dynamic_overwrite_partitions(table: FileStore, new_entries: Sequence[ManifestEntry]) -> set[bytes]:
    """The partitions a dynamic overwrite replaces: those its new files write, except, on a
    cross-partition table, a file of retractions only: the `-D` a key moved by the overwrite
    leaves in its old partition, which is no data of that partition (replacing it would drop
    the partition's other keys)."""
    if table.bucket_mode() != BucketMode.CROSS_PARTITION:
        return {e.partition for e in new_entries}
    return {e.partition for e in new_entries if e.file.delete_row_count is None
            or e.file.delete_row_count < e.file.row_count}


def _conflict(table: FileStore, why: str) -> CommitConflictError:
    return CommitConflictError(
        f"table {table.name} (cross-partition upsert): {why}; committing would leave a key in two "
        f"places. Nothing was committed, write the batch again")


class _KeyReader:
    """The distinct keys of data files of any buckets (None when one will not read); each file's
    keys are read once per check, however many of this commit's buckets meet it."""

    def __init__(self, table: FileStore, key_names: list[str]):
        self.table = table
        self.key_names = key_names
        file_schema = table.schema.data_file_arrow_schema()
        self.schema = pa.schema([file_schema.field(k) for k in key_names])
        self.reader = table.file_reader()
        self.codec = table.partition_codec()
        self._read: dict[tuple[bytes, int, str], pa.Table] = {}

    def of(self, files: list[tuple[bytes, int, DataFileMeta]]) -> pa.Table | None:
        tables = []
        try:
            for partition, bucket, f in files:
                where = (partition, bucket, f.file_name)
                if where not in self._read:
                    bucket_dir = self.table.path_factory.bucket_dir(self.codec.from_binary(partition).spec, bucket)
                    self._read[where] = self.reader.read(f"{bucket_dir}/{f.file_name}", self.key_names,
                                                         self.schema, f)
                tables.append(self._read[where])
        except (LakehouseError, OSError):
            return None  # when in doubt (a file gone or damaged), the keys are shared
        return pa.concat_tables(tables).group_by(self.key_names).aggregate([])
