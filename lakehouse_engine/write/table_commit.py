"""TableCommit: turn CommitMessages into manifests and one atomic snapshot, with bounded retries.

As Paimon's TableCommitImpl over its FileStoreCommitImpl: TableCommit decides what a commit lands
(the data as an APPEND or OVERWRITE, then its compaction as a COMPACT; what landed before, by
`write.commit_retry`), builds a planner per kind (`write.commit_planners`) and hands each to the
commit loop (`write.file_store_commit`); the level 0 the buckets kept where readers skip it goes up
after (`write.level0_settlement`), and snapshots expire after each commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CommitConflictError, LakehouseError, StorageError
from lakehouse_engine.format.manifest_entries import ManifestEntry
from lakehouse_engine.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind
from lakehouse_engine.options import DYNAMIC_PARTITION_OVERWRITE, WRITE_ONLY
from lakehouse_engine.write.commit_message import CommitMessage, delete_message_files
from lakehouse_engine.write.commit_planners import (
    AppendPlanner,
    CommitPlanner,
    CompactPlanner,
    OverwritePlanner,
)
from lakehouse_engine.write.commit_retry import (
    RetryGuard,
    message_entries,
    post_commit_error,
    storage_error,
)
from lakehouse_engine.write.cross_partition_commit import dynamic_overwrite_partitions
from lakehouse_engine.write.file_store_commit import FileStoreCommit
from lakehouse_engine.write.level0_settlement import Level0Settlement
from lakehouse_engine.write.resequence import Resequencer

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)

__all__ = ["BATCH_COMMIT_IDENTIFIER", "TableCommit"]


class TableCommit:
    """Commits the messages of one write (from any number of processes) as snapshots."""

    def __init__(self, table: FileStore, commit_user: str,
                 overwrite_partition: Mapping[str, object] | Sequence[Mapping[str, object]] | None = None,
                 *, restored: bool = False, once: bool = True,
                 dynamic_partition_overwrite: bool | None = None,
                 expire: Callable[[], None] | None = None):
        """A committer; `overwrite_partition` makes commits OVERWRITE that partition spec (or each
        of a list of specs; `{}` is the whole table). `restored`: the commit user was given (not
        new), so its first commit looks for snapshots it landed earlier. `once`: a batch commit,
        refused after it succeeded once. `expire`: run after each commit that landed snapshots
        (unless `write-only`), as Paimon's commit runs its snapshot expiry; best effort, it must
        not raise (the table's writers pass `table.expire_after_commit`).

        An overwrite of `{}` on a partitioned table follows Paimon's `dynamic-partition-overwrite`
        (default true; `dynamic_partition_overwrite` overrides the option): only the partitions
        the committed files are in are replaced, and a commit without files replaces nothing.
        A non-empty spec always replaces exactly what it names (a static overwrite)."""
        self.table = table
        self.expire = expire
        self.commit_user = commit_user
        self.once = once
        self._retries = RetryGuard(table, commit_user, restored)
        self._landed_files: set[str] = set()  # data files of this committer's commits that landed
        specs: list[dict[str, object]] | None
        if overwrite_partition is None:
            specs = None
        elif isinstance(overwrite_partition, Mapping):
            specs = [dict(overwrite_partition)]
        else:
            specs = [dict(p) for p in overwrite_partition]
        self.overwrite_specs = specs
        opts = table.schema.core_options
        if dynamic_partition_overwrite is None:
            dynamic_partition_overwrite = opts.require(DYNAMIC_PARTITION_OVERWRITE)
        #: Dynamic overwrite: the partitions being replaced are those of the committed files.
        self.dynamic_overwrite = (dynamic_partition_overwrite and specs == [{}]
                                  and bool(table.schema.partition_keys))
        self._dynamic_partitions: set[bytes] = set()
        #: The commit loop of each planner (its retries and manifests follow the table's options).
        self._file_store_commit = FileStoreCommit(table, commit_user)
        self._level0 = Level0Settlement(table, commit_user, lambda planner, identifier: self._try_commit(
            planner, identifier), self._file_store_commit.max_retries)
        self._committed = False
        self._messages: list[CommitMessage] = []
        self._resequencer: Resequencer | None = None
        table.partition_codec().check_spec_keys(self.overwrite_specs or [], table.name, "overwrite")

    # ---- public ------------------------------------------------------------------
    def commit(self, messages: Sequence[CommitMessage],
               commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> list[int]:
        """Commit messages; returns the ids of the snapshots they landed in (APPEND/OVERWRITE, then
        COMPACT). Retrying messages that already landed is a no-op that returns those snapshots.

        Raises:
            PostCommitError: the data landed (its `snapshot_ids`), then the compaction that follows
                failed; retrying the same commit finishes it without committing the data twice.
            StorageError: an I/O error (disk full, ...) before the commit landed.
            CommitConflictError: the commit cannot apply on the latest snapshot; nothing landed.
        """
        if self._committed:
            raise LakehouseError(
                f"this batch commit of table {self.table.name} was already used; a batch write "
                f"commits once (start a new write builder)")
        messages = list(messages)
        if self._level0.maintains_deletion_vectors():
            self._level0.check_deletion_vectors_maintained(messages)
        self._messages = messages
        new_entries, compact_entries = message_entries(messages)
        data_kind: CommitKind | None = (CommitKind.OVERWRITE if self.overwrite_specs is not None
                                        else CommitKind.APPEND if new_entries else None)
        if self.dynamic_overwrite:
            self._dynamic_partitions = dynamic_overwrite_partitions(self.table, new_entries)
            if not new_entries:
                data_kind = None  # nothing written: a dynamic overwrite replaces no partition
        landed = self._retries.filter_committed(messages, new_entries, compact_entries, commit_identifier,
                                                data_kind or CommitKind.APPEND)
        written: list[int] = []
        if landed.superseded:
            log.info("table %s: commit %s of user %s landed before a later one of the same user; "
                     "nothing to do", self.table.name, commit_identifier, self.commit_user)
        else:
            if data_kind is not None:
                sid = landed.get(data_kind)
                if sid is None:
                    sid = self._commit_data(new_entries, data_kind, commit_identifier)
                written.append(sid)
                self._landed_files |= {e.file.file_name for e in new_entries}
            compacted = None
            self._level0.drop_changelog_without_compaction(messages)
            if compact_entries or any(m.compact_changelog for m in messages):
                sid = compacted = landed.get(CommitKind.COMPACT)
                if sid is None:
                    sid = compacted = self._commit_compaction(messages, compact_entries, commit_identifier, written)
                if sid is not None:
                    written.append(sid)
            if written:
                # Level 0 the buckets kept where readers skip it goes up against what landed.
                written += self._level0.settle(messages, commit_identifier, written, compacted,
                                               self.overwrite_specs is not None)
        self._committed = self.once
        if written and self.expire is not None and not self.table.options.get(WRITE_ONLY):
            # As Paimon does: expire snapshots past the retention options after each commit.
            self.expire()
        return written

    def _commit_data(self, entries: list[ManifestEntry], kind: CommitKind, identifier: int) -> int:
        """Commit the APPEND or OVERWRITE snapshot; an I/O error becomes a StorageError."""
        try:
            sid = self._try_commit(self._planner(kind, entries), identifier)
        except StorageError:
            raise
        except OSError as exc:
            raise storage_error(exc, f"commit to table {self.table.name} failed before its snapshot "
                                     f"landed; retrying the same commit is safe") from exc
        assert sid is not None
        return sid

    def _commit_compaction(self, messages: list[CommitMessage], entries: list[ManifestEntry],
                           identifier: int, written: list[int]) -> int | None:
        """Commit the COMPACT snapshot that follows the data; once the data landed (`written`),
        a failure here is a PostCommitError, or a warning when another change won the race."""
        if self._retries.retrying and self._retries.compaction_output_gone(messages):
            log.warning("table %s: the compaction of this retried commit was given up by an earlier "
                        "attempt; only its data is committed", self.table.name)
            return None
        try:
            try:
                return self._try_commit(self._planner(CommitKind.COMPACT, entries), identifier)
            except CommitConflictError:
                # Another compaction or overwrite got there first. Our compaction output is
                # garbage; the data itself (the APPEND above, if any) is committed and safe.
                # Its changelog goes with it: a `lookup` changelog belongs to the compaction that
                # takes its level-0 files up (they stay in level 0, and the committer's or a later
                # compaction gives it), a full-compaction one is the compaction's own.
                delete_message_files(self.table, messages, compaction_only=True)
                for m in messages:
                    m.compact_before, m.compact_after, m.compact_changelog = [], [], []
                    m.deletion_vector_files, m.deletion_vector_base = [], None
                if not written:
                    raise
                log.warning("table %s: compaction after snapshot %s lost to a concurrent change; "
                            "its files were removed", self.table.name, written[-1])
                return None
        except (OSError, LakehouseError) as exc:
            if not written:
                if isinstance(exc, OSError) and not isinstance(exc, LakehouseError):
                    raise storage_error(exc, f"compaction commit to table {self.table.name} failed "
                                             f"before its snapshot landed") from exc
                raise
            raise post_commit_error(self.table, written, exc) from exc

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the data files of messages that will not be committed.

        Raises:
            LakehouseError: this committer committed them (a PostCommitError came after they
                landed): deleting them would break the table.
        """
        landed = sorted({f.file_name for m in messages for f in m.new_files} & self._landed_files)
        if landed:
            raise LakehouseError(
                f"table {self.table.name}: cannot abort messages whose data this committer committed "
                f"(files {landed[:3]}); retry the commit instead, it is a no-op for what landed")
        delete_message_files(self.table, messages)

    def truncate_table(self) -> list[int]:
        """pypaimon's `commit.truncate_table()`: one OVERWRITE snapshot that removes every row."""
        return self._truncate([{}])

    def truncate_partitions(self, partitions: Sequence[Mapping[str, object]]) -> list[int]:
        """pypaimon's `commit.truncate_partitions(specs)`: one OVERWRITE snapshot removing every
        row of the partitions (non-empty full or partial specs; LakehouseError otherwise)."""
        specs = [dict(p) for p in partitions]
        if not specs or not all(specs):
            raise LakehouseError(f"truncate_partitions of table {self.table.name} needs non-empty "
                                 f"partition specs")
        self.table.partition_codec().check_spec_keys(specs, self.table.name, "truncate_partitions")
        return self._truncate(specs)

    def _truncate(self, specs: list[dict[str, object]]) -> list[int]:
        self.overwrite_specs = specs
        self.dynamic_overwrite = False  # these name what goes, whatever the table's option
        return self.commit([])

    def close(self) -> None:
        pass

    def __enter__(self) -> TableCommit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the planners ---------------------------------------------------------------
    def _planner(self, kind: CommitKind, entries: list[ManifestEntry]) -> CommitPlanner:
        if self._resequencer is None or self._resequencer.messages is not self._messages:
            self._resequencer = Resequencer(self.table, self._messages)
        if kind is CommitKind.OVERWRITE:
            return OverwritePlanner(self.table, entries, self._messages, self._resequencer,
                                    self.overwrite_specs or [{}],
                                    self._dynamic_partitions if self.dynamic_overwrite else None)
        planner = AppendPlanner if kind is CommitKind.APPEND else CompactPlanner
        planned = planner(self.table, entries, self._messages, self._resequencer)
        planned.commit_user = self.commit_user
        return planned

    def _try_commit(self, planner: CommitPlanner, identifier: int) -> int | None:
        """Commit the planner's changes as the next snapshot through the commit loop
        (FileStoreCommit.try_commit); None when it has nothing to commit."""
        return self._file_store_commit.try_commit(planner, identifier)
