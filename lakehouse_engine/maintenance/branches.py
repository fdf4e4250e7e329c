"""Branches of a table, as Paimon lays them out: `branch/branch-<name>/` holds a branch's
snapshots, schemas and tags; its data and manifest files sit in the table directory beside
main's, shared.

Creating a branch copies metadata only (a tag's snapshot and the schemas it needs, or just the
schemas for an empty branch); dropping one deletes its directory (files only it referenced become
orphans for `remove_orphan_files`). Expiry, tag deletion, rollback and orphan removal on any
branch keep every file another branch references (`maintenance.references`).

`fast_forward(name)` makes main what the branch is, as Paimon's `FileSystemBranchManager.fastForward`
does (main's snapshots, schemas and tags from the branch's earliest snapshot on are replaced by
the branch's), in an order that keeps main readable at every step: main's later snapshots go
newest first, then schemas, then the branch's snapshots are written newest first, so the latest
snapshot a reader finds is always a whole snapshot of main or of the branch, never a mix.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CommitConflictError, InvalidIdentifierError, LakehouseError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.path_factory import BRANCH_PREFIX, MAIN_BRANCH, PathFactory, branch_path
from lakehouse_engine.store.file_store import BranchNotExistError
from lakehouse_engine.store.snapshot_manager import LATEST
from lakehouse_engine.store.tag_files import TAG_PREFIX, list_tags, tag_path, tag_snapshot

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)
_BAD_BRANCH_CHARS = re.compile(r"[/\\$.\x00-\x1f\x7f]")

__all__ = ["BranchAlreadyExistError", "BranchManager", "BranchNotExistError", "validate_branch_name"]


class BranchAlreadyExistError(LakehouseError, ValueError):
    """A branch of that name already exists (a ValueError, as pypaimon raises)."""


def validate_branch_name(name: str) -> str:
    """`name` if it can name a branch (as Paimon: not `main`, not blank, not a number; no path
    separator, `$`, `.` or control character), else InvalidIdentifierError saying why."""
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise InvalidIdentifierError(f"branch name {name!r} is blank or has surrounding blanks")
    if name == MAIN_BRANCH:
        raise InvalidIdentifierError(f"branch name {name!r} is the default branch and cannot be used")
    if name.isdigit():
        raise InvalidIdentifierError(f"branch name {name!r} is numeric only; use e.g. 'b{name}'")
    if _BAD_BRANCH_CHARS.search(name) or len((BRANCH_PREFIX + name).encode("utf-8")) > 255:
        raise InvalidIdentifierError(
            f"branch name {name!r} may not contain '/', '\\', '$', '.' or control characters and "
            f"is at most {255 - len(BRANCH_PREFIX)} bytes")
    return name


class BranchManager:
    """The branches of one table (pypaimon's `table.branch_manager()`); works from its main store."""

    def __init__(self, table: FileStore):
        self.main = table if table.branch == MAIN_BRANCH else table.for_branch(MAIN_BRANCH)

    # ---- reading -------------------------------------------------------------------------------
    def branches(self) -> list[str]:
        """The table's branches other than main, sorted."""
        return self.main.branches()

    def list_branches(self) -> list[str]:
        """pypaimon's name for `branches()`."""
        return self.branches()

    def branch_exists(self, name: str) -> bool:
        return name == MAIN_BRANCH or name in self.branches()

    def branch_path(self, name: str) -> str:
        return branch_path(self.main.path, name)

    # ---- creating and dropping ----------------------------------------------------------------
    def create_branch(self, name: str, tag_name: str | None = None, ignore_if_exists: bool = False) -> None:
        """Create branch `name`: from tag `tag_name` (the branch starts at the tagged snapshot and
        keeps the tag), else empty with main's schemas. BranchAlreadyExistError when it exists
        (unless `ignore_if_exists`); TagNotExistError when the tag does not."""
        validate_branch_name(name)
        if self.branch_exists(name):
            if ignore_if_exists:
                return
            raise BranchAlreadyExistError(f"branch {name!r} of table {self.main.name} already exists")
        fio = self.main.file_io
        paths = PathFactory(self.main.path, branch=name)
        if tag_name is None:
            latest = self.main.schema_manager().schema_ids()[-1]
            self._copy_schemas(paths, latest)
            return
        snapshot = tag_snapshot(self.main, tag_name)
        # Schemas first, then the snapshot, then the tag: a branch whose snapshot is there can
        # always read its schema.
        self._copy_schemas(paths, snapshot.schema_id)
        fio.try_put_if_absent(paths.snapshot_path(snapshot.id), snapshot.to_json().encode())
        fio.try_put_if_absent(f"{paths.tag_dir}/{TAG_PREFIX}{tag_name}",
                              fio.read_bytes(tag_path(self.main, tag_name)))

    def _copy_schemas(self, to: PathFactory, up_to: int) -> None:
        fio = self.main.file_io
        for sid in self.main.schema_manager().schema_ids():
            if sid <= up_to:
                fio.try_put_if_absent(to.schema_path(sid), fio.read_bytes(self.main.path_factory.schema_path(sid)))

    def drop_branch(self, name: str) -> None:
        """Delete branch `name` (its snapshots, schemas and tags); BranchNotExistError if none.
        Data files only it referenced stay until `remove_orphan_files`."""
        self._check_exists(name)
        if name == MAIN_BRANCH:
            raise InvalidIdentifierError("the main branch cannot be dropped")
        self.main.file_io.delete_dir(self.branch_path(name))

    def rename_branch(self, from_name: str, to_name: str) -> None:
        """Rename a branch: its files move to the new name's directory."""
        if from_name == MAIN_BRANCH:
            raise InvalidIdentifierError("the main branch cannot be renamed")
        self._check_exists(from_name)
        validate_branch_name(to_name)
        if self.branch_exists(to_name):
            raise BranchAlreadyExistError(f"branch {to_name!r} of table {self.main.name} already exists")
        fio = self.main.file_io
        source, target = self.branch_path(from_name), self.branch_path(to_name)
        for status in fio.list_status(source, recursive=True):
            if not status.is_dir:
                fio.write_bytes(target + status.path[len(source):], fio.read_bytes(status.path))
        fio.delete_dir(source)

    def _check_exists(self, name: str) -> None:
        if not self.branch_exists(name):
            raise BranchNotExistError(
                f"branch {name!r} of table {self.main.name} does not exist "
                f"(branches: {', '.join(['main', *self.branches()])})")

    # ---- fast-forward ---------------------------------------------------------------------------
    def fast_forward(self, name: str) -> None:
        """Make main what branch `name` is: main's snapshots, schemas and tags from the branch's
        earliest snapshot on are replaced by the branch's (Paimon's fastForward).

        Readers of main see a whole snapshot of main or of the branch at every step; a crash
        leaves main readable and running `fast_forward` again finishes it. CommitConflictError
        when a commit to main landed while this ran (main then holds that commit).
        """
        if name == MAIN_BRANCH:
            raise InvalidIdentifierError("cannot fast-forward main to itself; name a branch")
        self._check_exists(name)
        branch = self.main.for_branch(name)
        ids = branch.snapshot_manager().list_snapshot_ids()
        if not ids:
            raise LakehouseError(
                f"cannot fast-forward table {self.main.name} to branch {name!r}: the branch has no snapshot")
        snapshots = [branch.snapshot(i) for i in ids]
        first, last = snapshots[0], snapshots[-1]
        main, fio = self.main, self.main.file_io
        mains = main.snapshot_manager()
        main_ids = mains.list_snapshot_ids()
        # Schemas from the branch's earliest snapshot's on are the branch's; main's others go.
        branch_schemas = {sid: fio.read_bytes(branch.path_factory.schema_path(sid))
                          for sid in branch.schema_manager().schema_ids() if sid >= first.schema_id}
        main_schemas = [sid for sid in main.schema_manager().schema_ids() if sid >= first.schema_id]
        differing = [sid for sid in main_schemas
                     if fio.read_bytes(main.path_factory.schema_path(sid)) != branch_schemas.get(sid)]
        # Main's snapshots that must go before anything else changes: those above the branch's
        # latest, and, when a schema file changes under them, every one from the branch point on.
        doomed = [i for i in main_ids if i >= first.id and (differing or i > last.id)]
        # Main's long-lived changelogs from the branch point on are main's replaced history: they
        # go first (a reader never reads them as main's changes), the branch's come last.
        branch_changelogs = branch.snapshot_manager().list_long_lived_changelog_ids()
        point = min([first.id, *branch_changelogs])
        self._drop_changelogs_from(point)
        fio.delete_file(f"{main.path_factory.snapshot_dir}/LATEST")
        for sid in sorted(doomed, reverse=True):
            fio.delete_file(main.path_factory.snapshot_path(sid), quiet=False)
        for sid in differing:
            if sid not in branch_schemas:
                fio.delete_file(main.path_factory.schema_path(sid), quiet=False)
        for sid, data in sorted(branch_schemas.items()):
            if sid in differing or sid not in main_schemas:
                fio.overwrite_atomic(main.path_factory.schema_path(sid), data)
        # Newest first: the latest snapshot a reader finds is the branch's from the first write on.
        for snapshot in reversed(snapshots):
            self._put_snapshot(snapshot, replace=snapshot.id in main_ids and snapshot.id not in doomed)
        self._replace_tags(branch, first.id)
        for cid in branch_changelogs:
            fio.overwrite_atomic(main.path_factory.long_lived_changelog_path(cid),
                                 fio.read_bytes(branch.path_factory.long_lived_changelog_path(cid)))
        if branch_changelogs:
            fio.overwrite_atomic(f"{main.path_factory.changelog_dir}/{LATEST}", str(branch_changelogs[-1]).encode())
        mains.commit_latest_hint(last.id)
        later = [i for i in mains.list_snapshot_ids() if i > last.id]
        if later:
            raise CommitConflictError(
                f"table {main.name}: a commit to main landed (snapshot {later[0]}) while it was "
                f"fast-forwarded to branch {name!r}; main now holds that commit on top of "
                f"{'the branch' if later[0] == last.id + 1 else 'an older main'}: check it, then "
                f"fast-forward again or roll back")

    def _drop_changelogs_from(self, point: int) -> None:
        """Delete main's long-lived changelogs of snapshots from `point` on, newest first (Paimon
        0.9's fastForward leaves them, and its stream then reads main's undone changes); the files
        only they read are orphans for `remove_orphan_files`."""
        mains = self.main.snapshot_manager()
        mains.delete_long_lived_changelogs(
            (cid for cid in mains.list_long_lived_changelog_ids() if cid >= point), quiet=False)

    def _put_snapshot(self, snapshot: Snapshot, replace: bool) -> None:
        main = self.main
        path = main.path_factory.snapshot_path(snapshot.id)
        data = snapshot.to_json().encode()
        if replace:
            main.file_io.overwrite_atomic(path, data)
        elif not main.file_io.try_put_if_absent(path, data):
            raise CommitConflictError(
                f"table {main.name}: a commit to main took snapshot id {snapshot.id} while main was "
                f"fast-forwarded; main holds that commit, run fast_forward again to finish")

    def _replace_tags(self, branch: FileStore, first_id: int) -> None:
        """Main's tags of snapshots from `first_id` on go; the branch's tags come."""
        fio = self.main.file_io
        for tag_name, tagged in list_tags(self.main).items():
            if tagged.id >= first_id:
                fio.delete_file(tag_path(self.main, tag_name))
        for tag_name in list_tags(branch):
            fio.overwrite_atomic(tag_path(self.main, tag_name), fio.read_bytes(tag_path(branch, tag_name)))

