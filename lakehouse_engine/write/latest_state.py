"""A writer's read of the table's latest state, reused when no snapshot landed since.

A deletion-vector writer reads the table's state at the first flush lookup of a commit cycle, and its
compaction at commit needs the state as it is after the flushes (another writer may have committed
meanwhile). When the latest snapshot id is still the one the flush read, the state is the same: the
compaction reuses it instead of reading the snapshot and its manifests again. (An id taken again
after a rollback is caught where any stale base is: the committer checks the bucket's vector index
and upper files are still those the compaction computed against.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_engine.write.bucket_router import RestoredState

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["latest_state"]


def latest_state(table: FileStore, read: RestoredState | None) -> RestoredState:
    """`read` (a state this cycle read) while the table's latest snapshot is still the one it
    holds, else the latest state read now."""
    if read is not None and read.latest is not None \
            and table.snapshot_manager().latest_snapshot_id() == read.latest.id:
        return read
    return RestoredState.read(table)
