"""Which buckets a stream writer's next full compaction takes (`full-compaction.delta-commits`, the
`full-compaction` producer's cadence), as Paimon's Flink sink tracks them (GlobalFullCompactionSinkWrite).

A bucket written at commit identifier `i` owes a full compaction (its changelog comes out of one).
The writer compacts every owing bucket fully at each commit whose identifier is a full-compaction
one, and remembers that identifier. A bucket stops owing only once a COMPACT snapshot of this
commit user with such an identifier `c >= i` is seen in the table, checked when the next commit is
prepared, and the writer's compaction at `c` left the bucket fully compacted (one clean sorted run
at the top level, or empty): a full compaction whose messages were thrown away, or whose COMPACT
commit lost to a concurrent change, or a bucket whose compaction at `c` was skipped while the other
buckets' landed in that COMPACT snapshot, is done again at the next full-compaction identifier, so
the changelog of those buckets is late, never lost.

A COMPACT snapshot of the same commit user and identifier that is not the writer's full compaction
(the committer's level-0-up of `write/level0_changelog.py`, `write/level0_settlement.py`) is
made only on `lookup`, first-row and deletion-vector tables; a `full-compaction` producer table is
none of them (first-row and deletion vectors refuse that producer), so its writer's COMPACT
snapshots are its own compactions at commit.

Such a bucket's levels (the writer's picture of its files) may hold the lost compaction's outputs:
before compacting it fully again, the writer takes its files from the latest snapshot
(`BucketWriter.realign_levels`).

Paimon's sink keeps the written buckets in its Flink checkpoint; a writer here has none, so a
writer restarted under the same commit user finds them in its own commits since its last full
compaction (`buckets_awaiting_full_compaction`). A writer of another commit user owes nothing for
what earlier writers wrote, as Paimon's sink started without state; a dedicated
`compact(full=True)` gives those buckets' changelog (docs/changelog.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lakehouse_engine.errors import SnapshotNotExistError
from lakehouse_engine.format.snapshot import CommitKind, is_full_compacted_identifier
from lakehouse_engine.mergetree.compact.universal import pick_unit

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.write.bucket_writer import BucketWriter

__all__ = ["FullCompactionCadence", "buckets_awaiting_full_compaction"]


class FullCompactionCadence:
    """The full compactions a stream writer submitted and has not seen land yet."""

    def __init__(self, table: FileStore, commit_user: str):
        """The cadence of `commit_user`'s writer of `table`."""
        self.table = table
        self.commit_user = commit_user
        #: Identifier of each submitted full compaction not seen landed -> the latest snapshot id
        #: when it was submitted (its COMPACT snapshot can only come after).
        self.to_check: dict[int, int] = {}

    def confirm(self, writers: Iterable[BucketWriter]) -> None:
        """Look for the newest COMPACT snapshot of a submitted full compaction (newest first, back
        to the oldest submission); the buckets written at or before its identifier owe no more."""
        if not self.to_check:
            return
        snapshots = self.table.snapshot_manager()
        floor = min(self.to_check.values())
        sid = snapshots.latest_snapshot_id() or 0
        landed = None
        while sid > floor and landed is None:
            try:
                s = snapshots.snapshot(sid)
            except SnapshotNotExistError:
                break  # expired meanwhile: not seen, so compacted again (late, not lost)
            if (s.commit_user == self.commit_user and s.commit_kind == CommitKind.COMPACT.value
                    and s.commit_identifier in self.to_check):
                landed = s.commit_identifier
            sid -= 1
        if landed is None:
            return
        for w in writers:
            # Only a bucket this writer left fully compacted at the landed identifier itself: the
            # COMPACT snapshot of a commit whose compaction of the bucket was skipped
            # (`BucketWriter.compact` met a file it could not read) holds the other buckets' full
            # compactions, not its own (every owing bucket is taken at every full identifier, so
            # an earlier one of its own is unconfirmed, and it is compacted again: late, not lost).
            if w.written_at is not None and w.written_at <= landed and w.full_compacted_at == landed:
                w.awaits_full_compaction = False
                w.written_at = None
        self.to_check = {i: since for i, since in self.to_check.items() if i > landed}

    def submitted(self, identifier: int, writers: Iterable[BucketWriter]) -> None:
        """Remember the full compaction of the commit `identifier` (prepared now), and which of the
        owing `writers`' buckets it left fully compacted (one clean sorted run at the top level,
        or none: what a full compaction leaves, told by what the bucket holds)."""
        self.to_check.setdefault(identifier, self.table.snapshot_manager().latest_snapshot_id() or 0)
        for w in writers:
            if w.awaits_full_compaction and pick_unit(w.levels(), self.table.options, True) is None:
                w.full_compacted_at = identifier

    def unconfirmed(self, before: int) -> bool:
        """Whether a full compaction submitted before the commit `before` was not seen landed."""
        return any(i < before for i in self.to_check)


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
