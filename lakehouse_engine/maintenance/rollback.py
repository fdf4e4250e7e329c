"""Rollback: make an earlier snapshot (by id) or a tag (by name) the latest again, as Paimon's
RollbackHelper does: later snapshots, tags of later snapshots and the files only they used go.

Readers see the old state until the moment the new one is complete, then the new one, and a
crash at any point leaves a readable table. The steps, in order:

  1. Plan: read the target, the snapshots after it and the tags; nothing has changed yet.
  2. Pin the LATEST hint to the current latest snapshot L. Readers take the hint when it names an
     existing snapshot and walk forward from it, so while L exists they see L, whatever else
     goes; a stale hint below the snapshots being deleted would show them a half-removed history.
  3. When the target snapshot has expired, write its file back from the tag (Paimon does too);
     it sits below the retained chain and readers still see L.
  4. Delete the snapshots after the target, newest first but L last: L going is the one moment
     readers switch from the old state to the target.
  5. Point LATEST (and EARLIEST, after a restore) at the target.
  6. Delete the tags of removed snapshots, then the files that neither the target nor a
     remaining tag references: a crash from here on only leaves orphan files.

A crash during step 4 leaves the old state readable (L is still there) with a hole in the
snapshot ids; running the same rollback again finishes it. Stop writers while rolling back: a
commit that lands meanwhile is reported (CommitConflictError) and the rollback stops.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from lakehouse_engine.errors import (
    CommitConflictError,
    CorruptFileError,
    LakehouseError,
    SnapshotNotExistError,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.maintenance.references import (
    DataPaths,
    References,
    changelog_files,
    consecutive_runs,
    delete_files,
    delta_changes,
    live_data_files,
    long_lived_changelog_references,
    metadata_references,
    tag_references,
)
from lakehouse_engine.maintenance.tags import list_tags, tag_path, tag_snapshot
from lakehouse_engine.store.snapshot_manager import EARLIEST, LATEST

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)


def rollback_to(table: FileStore, snapshot_or_tag: int | str) -> None:
    """Make snapshot `snapshot_or_tag` (an id) or tag `snapshot_or_tag` (a name) the latest.

    Raises:
        SnapshotNotExistError: no such snapshot (and no tag holding it), or no such tag
            (TagNotExistError).
        CorruptFileError: the target's own files cannot be read; nothing was changed.
        CommitConflictError: a commit landed while rolling back.
    """
    snapshots = table.snapshot_manager()
    target = _target(table, snapshot_or_tag)
    latest_id = snapshots.latest_snapshot_id()
    if latest_id is None:
        raise SnapshotNotExistError(f"cannot roll back table {table.name}: it has no snapshots")
    if target.id > latest_id:
        raise SnapshotNotExistError(
            f"cannot roll back table {table.name} to snapshot {target.id}: it is newer than the "
            f"latest snapshot {latest_id}")
    restore = not snapshots.snapshot_exists(target.id)

    # 1. Plan.
    removed = []
    for sid in range(target.id + 1, latest_id + 1):
        with contextlib.suppress(SnapshotNotExistError):
            removed.append(snapshots.snapshot(sid))
    tags = list_tags(table)
    dropped_tags = sorted(n for n, t in tags.items() if t.id > target.id)
    kept_tags = [t for n, t in tags.items() if t.id <= target.id]
    doomed = _plan(table, target, removed, kept_tags)
    # Long-lived changelogs after the target (a target restored from a tag is older than the
    # earliest snapshot) describe changes that are being undone: they go too, as in Paimon.
    changelogs = []
    for cid in (i for i in snapshots.list_long_lived_changelog_ids() if i > target.id):
        with contextlib.suppress(SnapshotNotExistError):
            changelogs.append(snapshots.long_lived_changelog(cid))
    if changelogs:
        doomed.update(_changelogs_plan(table, target, changelogs, kept_tags))

    fio, paths = table.file_io, table.path_factory
    latest_hint = f"{paths.snapshot_dir}/{LATEST}"
    if removed:
        # 2. Pin LATEST to L (errors propagate: nothing has changed yet).
        fio.overwrite_atomic(latest_hint, str(latest_id).encode())
    if restore:
        # 3. Bring the expired snapshot back from the tag.
        fio.try_put_if_absent(paths.snapshot_path(target.id), target.to_json().encode("utf-8"))
    # 4. Later snapshots, newest first, the latest one last.
    newest_first = sorted(removed, key=lambda s: s.id, reverse=True)
    for s in newest_first[1:] + newest_first[:1]:
        if s.id == latest_id and snapshots.snapshot_exists(latest_id + 1):
            raise CommitConflictError(
                f"rolling back table {table.name} to snapshot {target.id}: snapshot "
                f"{latest_id + 1} was committed meanwhile, so the rollback stopped (the table "
                f"still reads snapshot {latest_id + 1}); stop writers and roll back again")
        with contextlib.suppress(FileNotFoundError):
            fio.delete_file(paths.snapshot_path(s.id), quiet=False)
    # 5. Hints: only hints, so a failure here is harmless (readers verify them).
    with contextlib.suppress(OSError):
        fio.overwrite_atomic(latest_hint, str(target.id).encode())
        if restore:
            fio.overwrite_atomic(f"{paths.snapshot_dir}/{EARLIEST}", str(target.id).encode())
    # 6. Long-lived changelogs after the target, newest first; tags of removed snapshots; then
    #    the files nothing references any more.
    snapshots.delete_long_lived_changelogs(c.id for c in changelogs)
    for name in dropped_tags:
        fio.delete_file(tag_path(table, name))
    delete_files(table, doomed)


def _target(table: FileStore, snapshot_or_tag: int | str) -> Snapshot:
    """The snapshot to roll back to: a tag's, an existing snapshot, or an expired one a tag holds."""
    if isinstance(snapshot_or_tag, str):
        return tag_snapshot(table, snapshot_or_tag)
    if isinstance(snapshot_or_tag, bool) or not isinstance(snapshot_or_tag, int):
        raise LakehouseError(
            f"roll back table {table.name} to a snapshot id (int) or a tag name (str), "
            f"not {snapshot_or_tag!r}")
    snapshots = table.snapshot_manager()
    sid = snapshot_or_tag
    if snapshots.snapshot_exists(sid):
        return snapshots.snapshot(sid)
    # As Paimon: an expired snapshot that a tag still holds can be restored from the tag.
    for tag in list_tags(table).values():
        if tag.id == sid:
            return tag
    earliest, latest = snapshots.earliest_snapshot_id(), snapshots.latest_snapshot_id()
    span = f"snapshots {earliest}..{latest} exist" if latest else "the table has no snapshots"
    raise SnapshotNotExistError(
        f"cannot roll back table {table.name} to snapshot {sid}: it doesn't exist ({span}) "
        f"and no tag holds it")


def _changelogs_plan(table: FileStore, target: Snapshot, changelogs: list[Snapshot],
                     kept_tags: list[Snapshot]) -> References:
    """Files long-lived changelogs after the target read that neither the target nor a kept tag
    references (their changelog files, the files their deltas added, their lists)."""
    paths = DataPaths(table)
    going = long_lived_changelog_references(table, changelogs, paths)
    keep = metadata_references(table, [target])
    keep.data_files = live_data_files(table, target, paths) | changelog_files(table, target, paths)
    return going - (keep | tag_references(table, kept_tags, paths))


def _plan(table: FileStore, target: Snapshot, removed: list[Snapshot],
          kept_tags: list[Snapshot]) -> References:
    """Files the removed snapshots reference that neither the target nor a kept tag does.

    What a run of consecutive removed snapshots references is the live files of the snapshot
    before it plus what their deltas add; right after the target that snapshot is the target
    itself (kept anyway), otherwise (after a restore from a tag, or a hole) the run's first
    snapshot is merged in full. The target and the kept tags are read strictly (a rollback must
    not delete what it keeps); the removed snapshots tolerantly, since undoing a damaged commit is
    what a rollback is for, and what cannot be read is left to orphan removal.
    """
    paths = DataPaths(table)
    going = References()
    for run in consecutive_runs(removed):
        for i, s in enumerate(run):
            try:
                going.update(metadata_references(table, [s]))
                if i == 0 and s.id != target.id + 1:
                    going.data_files |= live_data_files(table, s, paths)
                going.data_files |= delta_changes(table, s, paths)[0] | changelog_files(table, s, paths)
            except CorruptFileError as exc:
                log.warning("table %s: rolling back past snapshot %s: %s; files only it "
                            "referenced are left for remove_orphan_files", table.name, s.id, exc)
    keep = metadata_references(table, [target])
    keep.data_files = live_data_files(table, target, paths) | changelog_files(table, target, paths)
    return going - (keep | tag_references(table, kept_tags, paths))
