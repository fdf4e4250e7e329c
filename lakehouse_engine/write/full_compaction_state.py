"""The buckets a stream writer still owes a full compaction (`full-compaction.delta-commits`),
read back from the table when the writer starts: Paimon's Flink writer keeps them in its
checkpointed state (GlobalFullCompactionSinkWrite's written buckets); a writer here has none, so
a restarted one finds them in its own commits since its last full compaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_engine.format.snapshot import CommitKind, is_full_compacted_identifier

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["buckets_awaiting_full_compaction"]


def buckets_awaiting_full_compaction(table: FileStore, commit_user: str,
                                     delta_commits: int) -> dict[tuple[bytes, int], int]:
    """(partition, bucket) of every file `commit_user`'s APPEND snapshots added after its last
    full compaction (its COMPACT snapshot at an identifier `delta_commits` names), each with the
    newest commit identifier that wrote it; searched newest first back to the earliest retained
    snapshot. Buckets another commit emptied since are left to the caller (no live file)."""
    sm = table.snapshot_manager()
    latest, earliest = sm.latest_snapshot_id(), sm.earliest_snapshot_id()
    if latest is None or earliest is None:
        return {}
    mio = table.manifest_io()
    buckets: dict[tuple[bytes, int], int] = {}
    for sid in range(latest, earliest - 1, -1):
        snapshot = sm.get_snapshot_by_id(sid)
        if snapshot is None or snapshot.commit_user != commit_user:
            continue
        if snapshot.commit_kind == CommitKind.COMPACT and is_full_compacted_identifier(
                snapshot.commit_identifier, delta_commits):
            break
        if snapshot.commit_kind == CommitKind.APPEND:
            for e in mio.added_entries(snapshot):
                if e.bucket >= 0:
                    buckets.setdefault((e.partition, e.bucket), snapshot.commit_identifier)
    return buckets
