"""Which level-0 files of a `lookup` table a stream's first full plan may read.

Paimon's first plan of such a table leaves level 0 out: Paimon's writers leave rows there only
until the compaction that takes them up, and that compaction gives their changelog (a stream that
read them in its first plan would get them twice). This engine's writers that leave rows in level
0 (`write-only`, a commit whose compaction lost a race) give their lookup changelog at their own
commit instead, in the COMPACT snapshot of that commit: left out of the first plan, those rows
would reach the stream never. So a level-0 file whose commit (commit user and identifier) also
committed changelog for its bucket is read in the first plan; any other (Paimon's, or one whose
commit has expired) is left out, as Paimon does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_engine.errors import SnapshotNotExistError
from lakehouse_engine.format.manifest_entries import ManifestEntry
from lakehouse_engine.format.snapshot import CommitKind, Snapshot

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def level0_with_changes_out(table: FileStore, snapshot: Snapshot, level0: list[ManifestEntry]) -> set[str]:
    """The names of the `level0` files (live in `snapshot`) whose changes the changelog of their
    own commit gave; found walking back through the snapshots that added them."""
    wanted = {(e.partition, e.bucket, e.file.file_name) for e in level0}
    if not wanted:
        return set()
    mio = table.manifest_io()
    snapshots = table.snapshot_manager()
    #: (commit user, identifier) -> the buckets a COMPACT snapshot of that commit gave changelog for.
    changelog_of: dict[tuple[str, int], set[tuple[bytes, int]]] = {}
    out: set[str] = set()
    sid = snapshot.id
    while wanted and sid > 0:
        try:
            s = snapshots.snapshot(sid)
        except SnapshotNotExistError:
            break  # expired: what is left is unknown, and stays out of the plan
        sid -= 1
        commit = (s.commit_user, s.commit_identifier)
        if s.commit_kind == CommitKind.COMPACT and s.changelog_manifest_list:
            metas = mio.read_manifest_list(s.changelog_manifest_list, s.changelog_manifest_list_size)
            changelog_of.setdefault(commit, set()).update((e.partition, e.bucket) for e in mio.read_entries(metas))
        elif s.commit_kind == CommitKind.APPEND:
            given = changelog_of.pop(commit, set())  # (batch commits of one user share an identifier)
            for e in mio.added_entries(s):
                where = (e.partition, e.bucket, e.file.file_name)
                if where in wanted:
                    wanted.discard(where)
                    if (e.partition, e.bucket) in given:
                        out.add(e.file.file_name)
    return out


__all__ = ["level0_with_changes_out"]
