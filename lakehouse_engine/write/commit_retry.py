"""Filter-committed: find the snapshots a commit already landed in, so that retrying it is a no-op;
and tell, when publishing a snapshot fails, whether it landed.

Two ways to recognise a commit that landed, as docs/snapshots.md ("Retrying a commit") states:

1. By identity, as Paimon's `FileStoreCommit.filterCommitted` does: every snapshot records its
   `commitUser` and `commitIdentifier`; a snapshot of the same user with the same identifier (and
   commit kind) is the commit, and one with a larger identifier proves it landed before.
2. By files, for a committer under another commit user: data files are UUID-named, so a snapshot
   whose delta added every new file of the messages is their commit. Only snapshots committed
   after the files were written can have added them, which bounds the walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse_engine.errors import (
    LakehouseError,
    PostCommitError,
    SnapshotNotExistError,
    StorageError,
)
from lakehouse_engine.format.manifest_entries import FileKind, ManifestEntry
from lakehouse_engine.format.snapshot import CommitKind, Snapshot
from lakehouse_engine.write.commit_message import CommitMessage

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

#: How far the clocks of the writer that timed a data file and the committer that timed a
#: snapshot may disagree: snapshots up to this long before a file's creation are searched too.
CLOCK_SKEW_ALLOWANCE_MS = 60_000


@dataclass
class Landed:
    """What a walk over the snapshots found of one commit: snapshot id by commit kind."""

    by_kind: dict[CommitKind, int] = field(default_factory=dict)
    #: A later identifier of the same user landed: this one was committed (or given up) before it.
    superseded: bool = False

    def get(self, kind: CommitKind) -> int | None:
        """The snapshot of `kind` the commit landed in, if any."""
        return self.by_kind.get(kind)


def snapshots_of_commit(table: FileStore, commit_user: str, identifier: int,
                        since_id: int | None) -> Landed:
    """The snapshots of (`commit_user`, `identifier`) newer than `since_id`.

    With `since_id` None (a committer that does not know where it started, such as a new process
    restoring a commit user), the walk goes back from the latest snapshot until it meets a
    snapshot of this user with a smaller identifier, or the earliest retained snapshot.
    """
    landed = Landed()
    for s in newest_first(table, since_id or 0):
        if s.commit_user != commit_user:
            continue
        if s.commit_identifier > identifier:
            landed.superseded = True
            break
        if s.commit_identifier < identifier:
            break
        landed.by_kind.setdefault(CommitKind(s.commit_kind), s.id)
        if s.commit_kind != CommitKind.COMPACT:
            break  # a commit's data snapshot comes before its compaction: nothing older is ours
    return landed


def filter_committed(table: FileStore, commit_user: str, identifiers: Iterable[int]) -> set[int]:
    """The identifiers of `commit_user` that have not been committed yet (Paimon's filterCommitted).

    As Paimon: the latest snapshot of the user proves every identifier up to its own committed.
    """
    wanted = set(identifiers)
    if not wanted:
        return wanted
    latest_of_user = latest_snapshot_of_user(table, commit_user)
    if latest_of_user is None:
        return wanted
    return {i for i in wanted if i > latest_of_user.commit_identifier}


def latest_snapshot_of_user(table: FileStore, commit_user: str) -> Snapshot | None:
    """The newest retained snapshot committed by `commit_user`, if any."""
    return next((s for s in newest_first(table) if s.commit_user == commit_user), None)


def newest_first(table: FileStore, after_id: int = 0) -> Iterator[Snapshot]:
    """The retained snapshots newer than `after_id`, from the latest back, stopping at the first
    one expired meanwhile (or never there, below a rollback): nothing older is left to look at."""
    snapshots = table.snapshot_manager()
    for sid in range(snapshots.latest_snapshot_id() or 0, after_id, -1):
        try:
            yield snapshots.snapshot(sid)
        except SnapshotNotExistError:
            return


def snapshot_adding(table: FileStore, file_names: set[str], not_before_millis: int) -> int | None:
    """The id of the snapshot whose delta added every file of `file_names`, searching the
    snapshots committed since `not_before_millis` (minus the clock skew allowance); None if none."""
    if not file_names:
        return None
    mio = table.manifest_io()
    bound = not_before_millis - CLOCK_SKEW_ALLOWANCE_MS
    for s in newest_first(table):
        if s.time_millis < bound:
            break
        added = {e.file.file_name for e in mio.added_entries(s)}
        if file_names <= added:
            return s.id
    return None


class RetryGuard:
    """One committer's memory of the commits it tried, to tell a retry and find what it landed."""

    def __init__(self, table: FileStore, commit_user: str, restored: bool):
        """`restored`: the commit user was given, not new, so it may have committed before."""
        self.table = table
        self.commit_user = commit_user
        self.restored = restored
        # Per commit identifier tried: the new files it commits. A first attempt reads nothing
        # (not even the latest id): a retry walks back from the latest snapshot to this user's.
        self._attempts: dict[int, frozenset[str]] = {}
        #: The last `filter_committed` was of an identifier tried before.
        self.retrying = False

    def filter_committed(self, messages: list[CommitMessage], new_entries: list[ManifestEntry],
                         compact_entries: list[ManifestEntry], identifier: int, data_kind: CommitKind) -> Landed:
        """The snapshots this commit already landed in (none on a first, fresh attempt: free)."""
        data_names = {e.file.file_name for e in new_entries}
        compact_names = {e.file.file_name for e in compact_entries if e.kind == FileKind.ADD} - {
            e.file.file_name for e in compact_entries if e.kind == FileKind.DELETE}  # upgrades keep names
        names = frozenset(data_names | compact_names)
        previous = self._attempts.get(identifier)
        self.retrying = previous is not None
        if previous is None:
            self._attempts[identifier] = names
            landed = (snapshots_of_commit(self.table, self.commit_user, identifier, None)
                      if self.restored else Landed())
        else:
            if previous != names:
                raise LakehouseError(
                    f"commit {identifier} of user {self.commit_user} to table {self.table.name} was "
                    f"tried before with other messages; a retry must commit the same messages")
            landed = snapshots_of_commit(self.table, self.commit_user, identifier, None)
        if landed.by_kind or landed.superseded:
            return landed
        if any(m.commit_user not in (None, self.commit_user) for m in messages):
            # Written under another commit user: maybe a retry by a new committer. The files are
            # UUID-named, so a snapshot that added them all is this commit.
            born = min((f.creation_time_millis or 0 for m in messages for f in m.new_files + m.compact_after),
                       default=0)
            for kind, group in ((data_kind, data_names), (CommitKind.COMPACT, compact_names)):
                sid = snapshot_adding(self.table, set(group), born)
                if sid is not None:
                    landed.by_kind[kind] = sid
        return landed

    def compaction_output_gone(self, messages: list[CommitMessage]) -> bool:
        """True when a file the compaction of `messages` wrote is not there any more (an earlier
        attempt lost to a concurrent change and removed them): it must not be committed."""
        codec = self.table.partition_codec()
        for m in messages:
            upgraded = {f.file_name for f in m.compact_before}
            d = self.table.path_factory.bucket_dir(codec.from_binary(m.partition).spec, m.bucket)
            if any(not self.table.file_io.exists(f"{d}/{f.file_name}")
                   for f in m.compact_after if f.file_name not in upgraded):
                return True
        return False


def message_entries(messages: Sequence[CommitMessage]) -> tuple[list[ManifestEntry], list[ManifestEntry]]:
    """The manifest entries of messages: the new files (APPEND/OVERWRITE), then the compaction's."""
    new_entries: list[ManifestEntry] = []
    compact_entries: list[ManifestEntry] = []
    for m in messages:
        for f in m.new_files:
            new_entries.append(ManifestEntry(FileKind.ADD, m.partition, m.bucket, m.total_buckets, f))
        for f in m.compact_before:
            compact_entries.append(ManifestEntry(FileKind.DELETE, m.partition, m.bucket, m.total_buckets, f))
        for f in m.compact_after:
            compact_entries.append(ManifestEntry(FileKind.ADD, m.partition, m.bucket, m.total_buckets, f))
    return new_entries, compact_entries


class SnapshotNotWritten(StorageError):
    """Writing a snapshot file failed and it is not there: that attempt's manifests are garbage."""


def storage_error(exc: OSError, message: str, kind: type[StorageError] = StorageError) -> StorageError:
    """A StorageError (or `kind`) with `message`, keeping the errno and path of the OS error."""
    if exc.errno is None:
        return kind(f"{message}: {exc}")
    # OSError's (errno, strerror, filename) form: str() then shows all three, as for any OS error.
    return kind(exc.errno, f"{message}: {exc.strerror or exc}", exc.filename)


def publish_snapshot(table: FileStore, path: str, snapshot: Snapshot) -> bool:
    """Put-if-absent `snapshot` at `path`: True when it landed, False when another committer holds
    the id (a lost race). Any other failure raises StorageError: a full disk is not a lost race
    (SnapshotNotWritten when the file is surely not there)."""
    try:
        return table.file_io.try_put_if_absent(path, snapshot.to_json().encode())
    except OSError as exc:
        put_error = exc
    # The put failed, yet it may have landed (an error after the link) or lost to another
    # committer meanwhile: the file there tells which.
    try:
        text = table.file_io.read_text(path)
    except FileNotFoundError:
        raise storage_error(put_error, f"table {table.name}: could not write snapshot file {path}; "
                                       f"nothing was committed", SnapshotNotWritten) from put_error
    except OSError as exc:
        raise storage_error(exc, f"table {table.name}: writing snapshot file {path} failed ({put_error}) "
                                 f"and reading it back failed too, so whether it landed is unknown; "
                                 f"retry the same commit (a landed one is recognised)") from exc
    try:
        landed = Snapshot.from_json(text, path)
    except LakehouseError:
        return False  # not ours (ours is published whole): another committer's
    return (landed.commit_user == snapshot.commit_user
            and landed.commit_identifier == snapshot.commit_identifier
            and landed.base_manifest_list == snapshot.base_manifest_list)


def post_commit_error(table: FileStore, written: list[int], exc: BaseException) -> PostCommitError:
    """The error of a failure after the data of a commit landed in `written` (chain `exc` to it)."""
    # The cause is chained, not quoted: its own words are about the compaction's snapshot.
    why = (f"{type(exc).__name__} {exc.strerror or ''}".rstrip() if isinstance(exc, OSError)
           else type(exc).__name__)
    return PostCommitError(
        f"table {table.name}: the data of this commit is committed (snapshot "
        f"{', '.join(map(str, written))}), then the compaction that follows it failed ({why}, see "
        f"the cause). Retrying the same commit is a no-op for the data and finishes the compaction",
        written)
