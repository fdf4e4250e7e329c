"""A stream writer's commit cycles, and whether its bucket levels are still the table's.

A TableWrite kept across commits (a stream writer) keeps each bucket's levels: its picture of the
bucket's files, maintained by its own flushes and compactions. The table can change under it: its
compaction at commit lost to a dedicated `table.compact()` (the committer removed the lost outputs,
and the files the winner replaced are removed by expiry), the committer took level 0 up after it, or
another writer added files. A lookup or compaction on such levels reads a file the table no longer
lists, which may be gone. Paimon's writer restores its levels from the latest snapshot after a failed
commit; ours does the same at the start of each commit cycle (`levels_stale`), unless its last commit
is still in flight (prepared, not committed yet: its files are the writer's own, not in any snapshot).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lakehouse_engine.write.commit_retry import snapshots_of_commit

if TYPE_CHECKING:
    from lakehouse_engine.format.manifest_entries import DataFileMeta
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["CommitCycles", "levels_stale"]


class CommitCycles:
    """The commit messages one TableWrite prepared, counted, and whether the commit of the last one
    is settled: it landed, or a later commit of its user did (so it was committed or given up)."""

    def __init__(self, table: FileStore, commit_user: str):
        """The cycles of `commit_user`'s writer of `table`."""
        self.table = table
        self.commit_user = commit_user
        #: How many times the writer prepared a commit (0: its first cycle).
        self.count = 0
        #: The last prepared commit's identifier and the latest snapshot id when it was prepared.
        self._last: tuple[int, int] | None = None
        self._settled_by: int | None = 0

    def prepared(self, identifier: int, handed_out: bool, known: int | None = None) -> None:
        """The writer prepared the commit of `identifier` (`handed_out`: with messages); `known`: a
        snapshot id it read this cycle (its commit lands above it), else the latest is read."""
        self.count += 1
        if handed_out:
            if known is None:
                known = self.table.snapshot_manager().latest_snapshot_id() or 0
            self._last = (identifier, known)
            self._settled_by = None

    def settled_by(self) -> int | None:
        """None while the commit of the last messages may still be in flight (see the class);
        else a snapshot id from which on every snapshot shows what that commit did."""
        if self._settled_by is None and self._last is not None:
            identifier, since = self._last
            landed = snapshots_of_commit(self.table, self.commit_user, identifier, since)
            if landed.by_kind or landed.superseded:
                # (Read after the walk: the snapshots it found are at or below it.)
                self._settled_by = self.table.snapshot_manager().latest_snapshot_id() or 0
        return self._settled_by


def levels_stale(held: Iterable[DataFileMeta], live: Iterable[DataFileMeta]) -> tuple[bool, list[DataFileMeta]]:
    """Whether `held` (a bucket's levels, but this cycle's own files) differ from `live` (the
    bucket's files in the latest snapshot), by file and level; and the held files `live` lacks."""
    live_ids = {(f.file_name, f.level) for f in live}
    held = list(held)
    gone = [f for f in held if (f.file_name, f.level) not in live_ids]
    return bool(gone) or len(held) != len(live_ids), gone
