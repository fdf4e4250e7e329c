"""Tags: a snapshot kept under a name, stored as Paimon stores it (`tag/tag-<name>`, the snapshot's JSON).

A tag keeps its snapshot readable after the snapshot itself expires: expiry never deletes a file a
tag references, rollback can return to a tag, and deleting a tag whose snapshot has expired deletes
the files only that tag kept.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CorruptFileError, SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.maintenance.references import (
    DataPaths,
    References,
    delete_files,
    snapshot_references,
    tag_references,
)
from lakehouse_engine.store.tag_manager import (
    TAG_ONLY_FIELDS,
    TAG_PREFIX,
    InvalidTagNameError,
    TagAlreadyExistError,
    TagNotExistError,
    as_snapshot,
    list_tags,
    read_tag,
    tag_path,
    tag_snapshot,
    validate_tag_name,
)

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable

log = logging.getLogger(__name__)

__all__ = [
    "TAG_ONLY_FIELDS", "TAG_PREFIX", "InvalidTagNameError", "TagAlreadyExistError", "TagNotExistError",
    "as_snapshot", "create_tag", "delete_tag", "list_tags", "tag_path", "tag_snapshot", "validate_tag_name",
]
def create_tag(table: FileStoreTable, name: str, snapshot_id: int | None = None) -> None:
    """Keep snapshot `snapshot_id` (the latest when None) under `name`.

    Raises:
        InvalidTagNameError: the name cannot name a tag.
        SnapshotNotExistError: the snapshot does not exist (or the table has none).
        TagAlreadyExistError: a tag of that name exists.
    """
    path = tag_path(table, name)
    snapshots = table.snapshot_manager()
    if snapshot_id is None:
        snapshot = snapshots.latest_snapshot()
        if snapshot is None:
            raise SnapshotNotExistError(
                f"table {table.name} has no snapshot to tag yet: commit something first")
    else:
        snapshot = snapshots.snapshot(snapshot_id)
    if not table.file_io.try_put_if_absent(path, snapshot.to_json().encode("utf-8")):
        existing = read_tag(table, path)
        held = f" (it keeps snapshot {existing.id})" if existing is not None else ""
        raise TagAlreadyExistError(
            f"tag {name!r} of table {table.name} already exists{held}; delete it first or "
            f"choose another name")
    # Expiry deletes a snapshot file first and reads the tags afterwards (see expire.py). If the
    # snapshot is still there now, any expiry of it will see this tag and keep its files; if it
    # is gone, an expiry may already be deleting them, so the tag would keep nothing.
    if not snapshots.snapshot_exists(snapshot.id):
        table.file_io.delete_file(path)
        raise SnapshotNotExistError(
            f"snapshot {snapshot.id} of table {table.name} expired while tag {name!r} was being "
            f"created; nothing was tagged")


def delete_tag(table: FileStoreTable, name: str) -> None:
    """Delete tag `name`, and the files only it kept when its snapshot has expired (as Paimon does).

    The tag file is deleted before those files: if anything fails in between, what is left are
    orphan files that `remove_orphan_files` deletes.
    """
    tag = tag_snapshot(table, name)
    try:
        doomed = _files_only_tag_keeps(table, name, tag)
    except CorruptFileError as exc:
        # The tag goes anyway; what it kept is left for orphan removal to judge.
        log.warning("table %s: cannot tell which files only tag %r kept (%s); deleting the tag "
                    "and leaving its files to remove_orphan_files", table.name, name, exc)
        doomed = None
    table.file_io.delete_file(tag_path(table, name), quiet=False)
    if doomed is not None:
        delete_files(table, doomed)


def _files_only_tag_keeps(table: FileStoreTable, name: str, tag: Snapshot) -> References | None:
    """Files tag `name` references that no retained snapshot and no other tag does (None: keep all)."""
    snapshots = table.snapshot_manager()
    ids = snapshots.list_snapshot_ids()  # not the EARLIEST hint: every snapshot counts here
    earliest_id = ids[0] if ids else None
    if earliest_id is None or tag.id >= earliest_id:
        # Its snapshot is retained (and references every file the tag does), or the history is
        # not the plain chain this cleanup relies on: leave any leftovers to orphan removal.
        return None
    # The tag is older than every retained snapshot. A file it shares with any of them is live
    # in the earliest one too (a deleted file never comes back), so that snapshot and the other
    # tags are everything to keep.
    paths = DataPaths(table)
    keep = snapshot_references(table, [snapshots.snapshot(earliest_id)], paths)
    others = [t for n, t in list_tags(table).items() if n != name]
    keep = keep | tag_references(table, others, paths)
    return tag_references(table, [tag], paths) - keep
