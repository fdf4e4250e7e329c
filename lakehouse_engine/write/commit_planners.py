"""What a commit of each kind changes, planned against the latest snapshot of one attempt.

`FileStoreCommit` (`write/file_store_commit.py`) runs one attempt loop for every kind (race for
the snapshot id, publish, clean up, back off); a planner per kind (APPEND, OVERWRITE, COMPACT)
says what the next snapshot holds on top of the latest one: its manifest entries, its index
manifest changes and, for later kinds of data, its changelog, and refuses (CommitConflictError)
what cannot apply on top of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from lakehouse_engine.errors import CommitConflictError, SnapshotNotExistError
from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.deletion_vectors import DELETION_VECTORS_INDEX
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import FileKind, IndexManifestEntry, ManifestEntry
from lakehouse_engine.format.snapshot import CommitKind, Snapshot
from lakehouse_engine.options import DELETION_VECTORS_ENABLED, MERGE_ENGINE
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.cross_partition_commit import check_keys_stay_put
from lakehouse_engine.write.first_row_check import check_first_row_keys_once
from lakehouse_engine.write.resequence import (
    Resequencer,
    check_compaction_sees_older_files,
    check_level0_stays_newest,
)

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def _keeps_all(entry: IndexManifestEntry) -> bool:
    return False


@dataclass
class IndexChanges:
    """The index files a commit adds, and which index files of the latest snapshot it drops."""

    added: list[IndexManifestEntry] = field(default_factory=list)
    removes: Callable[[IndexManifestEntry], bool] = _keeps_all


@dataclass
class PlannedChanges:
    """One attempt's changes on top of the latest snapshot."""

    #: The entries of the snapshot's delta manifest.
    changes: list[ManifestEntry]
    #: The delta manifest an earlier attempt wrote no longer holds these changes (files renamed).
    delta_stale: bool = False
    #: Changes to the index manifest; None keeps the latest snapshot's.
    index: IndexChanges | None = None
    #: The entries of the snapshot's changelog manifest list (none: the snapshot has no changelog).
    changelog: list[ManifestEntry] = field(default_factory=list)


class CommitPlanner:
    """Plans the snapshots of one commit kind; `plan` runs once per attempt."""

    kind: ClassVar[CommitKind]
    #: The delta manifest depends on the latest snapshot: every attempt writes its own.
    delta_per_attempt: ClassVar[bool] = False
    #: The committer's commit user (its own earlier snapshots are not another writer's).
    commit_user: str | None = None

    def __init__(self, table: FileStore, entries: Sequence[ManifestEntry],
                 messages: Sequence[CommitMessage], resequencer: Resequencer):
        self.table = table
        self.entries = list(entries)
        self.messages = messages
        self.resequencer = resequencer

    def prepare(self) -> bool:
        """Before the first attempt: False when there is nothing left to commit."""
        return True

    def plan(self, latest: Snapshot | None) -> PlannedChanges:
        """The changes of the next snapshot on top of `latest`; CommitConflictError when they
        cannot apply on it (nothing is committed then)."""
        raise NotImplementedError

    def _resequence(self, changes: list[ManifestEntry], latest: Snapshot | None) -> tuple[list[ManifestEntry], bool]:
        """Rows of this commit placed above what landed since they were written (later commit
        wins); the rewritten files have new names, so the entries (and delta manifest) change."""
        if not self.resequencer.resequence(changes, latest):
            return changes, False
        self.entries = self.resequencer.renamed(self.entries)
        return self.resequencer.renamed(changes), True


class AppendPlanner(CommitPlanner):
    """New data files added to the buckets (and the dynamic-bucket index files that go with them)."""

    kind = CommitKind.APPEND

    def plan(self, latest: Snapshot | None) -> PlannedChanges:
        check_keys_stay_put(self.table, self.messages, latest, self.commit_user)
        changes, renamed = self._resequence(list(self.entries), latest)
        if renamed and any(m.compact_changelog for m in self.messages) or self._lookup_stale(latest):
            # The lookup changelog compared these rows with the bucket as it was when they were
            # written; another writer changed those keys since, so it would be wrong. (A lookup
            # that found nothing to emit - a delete of an absent key - is just as stale.)
            raise CommitConflictError(
                f"table {self.table.name}: another writer committed the same keys while this write "
                f"computed its changelog against the older rows; nothing was committed, write the "
                f"batch again")
        check_bucket_counts(self.table, changes, latest)
        return PlannedChanges(changes, renamed, hash_index_changes(self.table, self.messages, latest),
                              changelog_entries(self.messages, "new_changelog"))


    def _lookup_stale(self, latest: Snapshot | None) -> bool:
        """True when a bucket a lookup changelog was computed for holds, or held since the lookup,
        files it did not see (another writer's, or a compaction's) with keys of this commit's new files."""
        looked_up = [m for m in self.messages if m.lookup_base is not None and m.new_files]
        if not looked_up or latest is None:
            return False
        mio = self.table.manifest_io()
        live = mio.live_entries(latest)
        # Every file added since the oldest lookup, the ones compacted away again too: a delete of
        # a key that a compaction then dropped at the top level (or marked in a deletion vector)
        # leaves no live file with the key, yet the key the lookup found is gone.
        since = min((m.lookup_snapshot for m in looked_up if m.lookup_snapshot is not None), default=latest.id)
        added: list[tuple[int, ManifestEntry]] = []
        snapshots = self.table.snapshot_manager()
        for sid in range(since + 1, latest.id + 1):
            try:
                s = snapshots.snapshot(sid)
            except SnapshotNotExistError:
                return True  # expired meanwhile: what it added is unknown, so assume the worst
            added += [(sid, e) for e in mio.added_entries(s)]
        for m in looked_up:
            # Not the compaction's inputs: a DV table's compaction at commit reads the bucket as it
            # is at prepare_commit, which may hold files the lookup (at the flush) never saw.
            seen = set(m.lookup_base or ()) | {f.file_name for f in m.new_files + m.compact_after}
            base = latest.id if m.lookup_snapshot is None else m.lookup_snapshot
            bucket = [e.file for e in live + [e for sid, e in added if sid > base]
                      if e.partition == m.partition and e.bucket == m.bucket]
            unseen = list({f.file_name: f for f in bucket if f.file_name not in seen}.values())
            if unseen and self.resequencer.share_keys(m, unseen):
                return True
        return False


class OverwritePlanner(CommitPlanner):
    """Every live file of the overwritten partitions deleted, the new files added."""

    kind = CommitKind.OVERWRITE
    delta_per_attempt = True

    def __init__(self, table: FileStore, entries: Sequence[ManifestEntry],
                 messages: Sequence[CommitMessage], resequencer: Resequencer,
                 specs: Sequence[Mapping[str, object]], dynamic_partitions: set[bytes] | None):
        """`specs`: the partitions replaced (`{}` the table); `dynamic_partitions`: for a dynamic
        overwrite, the partitions of the committed files instead."""
        super().__init__(table, entries, messages, resequencer)
        self.specs = specs
        self.dynamic_partitions = dynamic_partitions

    def plan(self, latest: Snapshot | None) -> PlannedChanges:
        # A cross-partition overwrite routes keys like an APPEND: another writer's key placed in a
        # partition this commit keeps, meanwhile, conflicts (those it replaces go with the partition).
        check_keys_stay_put(self.table, self.messages, latest, self.commit_user, replaced=self._replaces)
        live = self.table.manifest_io().live_entries(latest)
        overwritten = self._overwrite_deletes(live)
        changes, renamed = self._resequence(overwritten + self.entries, latest)
        check_one_bucket_count(self.table, changes)
        added = [e for m in self.messages for e in m.new_index_files]
        doomed = {e.partition for e in overwritten} | {e.partition for e in added}
        return PlannedChanges(changes, renamed, IndexChanges(added, lambda e: e.partition in doomed))

    def _replaces(self, partition: bytes) -> bool:
        """Whether this commit replaces `partition` (binary row)."""
        if self.dynamic_partitions is not None:
            return partition in self.dynamic_partitions
        return self.table.partition_codec().from_binary(partition).matches(self.specs)

    def _overwrite_deletes(self, live: list[ManifestEntry]) -> list[ManifestEntry]:
        """DELETE entries for every live file in the partitions being overwritten."""
        return [ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file)
                for e in live if self._replaces(e.partition)]


class CompactPlanner(CommitPlanner):
    """Compaction inputs deleted and outputs added, checked against what else changed the buckets."""

    kind = CommitKind.COMPACT

    def prepare(self) -> bool:
        # A bucket whose new files were re-sequenced lost its writer compaction (old numbers).
        self.entries = self.resequencer.without_dropped(self.entries)
        self.changelog = changelog_entries(self.messages, "compact_changelog")
        return bool(self.entries or self.changelog)

    def plan(self, latest: Snapshot | None) -> PlannedChanges:
        live = self.table.manifest_io().live_entries(latest)
        changes = list(self.entries)
        check_deletes_live(self.table, changes, live)
        check_levels_disjoint(self.table, changes, live)
        check_first_row_keys_once(self.table, self.messages, live)
        opts = self.table.options
        if opts.require(DELETION_VECTORS_ENABLED) or opts.require(MERGE_ENGINE) == "first-row":
            # Their next compaction of level 0 trusts it to hold the newest records: none may
            # stay there under newer ones this compaction takes up. (A DV table's compaction
            # drops deletes because it marked every older version of their keys;
            # `deletion_vector_changes` checks the bucket is what it looked up. A first-row
            # table's files hold no deletes, and its compaction may write nothing below the top
            # level: every row it took up was a key already above.)
            check_level0_stays_newest(self.table, self.messages, live)
        else:
            check_compaction_sees_older_files(self.table, changes, live)
        return PlannedChanges(changes, changelog=list(self.changelog),
                              index=deletion_vector_changes(self.table, self.messages, latest, live))


def changelog_entries(messages: Sequence[CommitMessage], which: str) -> list[ManifestEntry]:
    """ADD entries of the messages' changelog files (`new_changelog` or `compact_changelog`)."""
    return [ManifestEntry(FileKind.ADD, m.partition, m.bucket, m.total_buckets, f)
            for m in messages for f in getattr(m, which)]


# ---- conflict checks and index changes ----------------------------------------------------------
def hash_index_changes(table: FileStore, messages: Sequence[CommitMessage],
                       latest: Snapshot | None) -> IndexChanges | None:
    """The dynamic-bucket HASH index files of `messages`, replacing those of their buckets;
    CommitConflictError when another writer changed the index of a partition this commit extends
    since the write started (it could duplicate keys). None when the messages have no index file."""
    added = [e for m in messages for e in m.new_index_files]
    if not added:
        return None
    current = latest.index_manifest if latest else None
    by_partition: dict[bytes, set[str]] = {}
    for e in table.manifest_io().read_index_manifest(current) if current else []:
        if e.index_type != DELETION_VECTORS_INDEX:  # (a DV table's vectors change at every commit)
            by_partition.setdefault(e.partition, set()).add(e.file_name)
    codec = table.partition_codec()
    for m in messages:
        changed = m.index_base is not None and by_partition.get(m.partition, set()) != set(m.index_base)
        if m.new_index_files and changed:
            raise CommitConflictError(
                f"table {table.name}, partition "
                f"{codec.from_binary(m.partition).path_string() or '(none)'}: another writer "
                f"assigned new keys to dynamic buckets since this write started, so this "
                f"commit could duplicate keys; nothing was committed, write the batch again")
    replaced = {(e.partition, e.bucket, e.index_type) for e in added}
    return IndexChanges(added, lambda e: (e.partition, e.bucket, e.index_type) in replaced)


def deletion_vector_changes(table: FileStore, messages: Sequence[CommitMessage], latest: Snapshot | None,
                            live: list[ManifestEntry]) -> IndexChanges | None:
    """The deletion-vector index files of a DV table's compaction, replacing those of their buckets;
    CommitConflictError when a bucket's vector index files or its files above level 0 are no longer
    what the vectors were computed against (a mark would be lost, or land on a rewritten file).
    None when no message compacted a DV bucket."""
    compacted = [m for m in messages if m.deletion_vector_base is not None]
    if not compacted:
        return None
    index: dict[tuple[bytes, int], list[str]] = {}
    if latest is not None:
        for ie in table.manifest_io().index_entries(latest):
            if ie.index_type == DELETION_VECTORS_INDEX:
                index.setdefault((ie.partition, ie.bucket), []).append(ie.file_name)
    upper: dict[tuple[bytes, int], list[str]] = {}
    for e in live:
        if e.file.level > 0:
            upper.setdefault((e.partition, e.bucket), []).append(e.file.file_name)
    codec = table.partition_codec()
    buckets = [(m.partition, m.bucket) for m in compacted]
    if len(set(buckets)) != len(buckets):
        # Writers of one bucket in one commit (Spark tasks) each looked up without the other's
        # files: their vectors cannot both be right. The committer compacts the bucket again.
        raise CommitConflictError(
            f"table {table.name}: two writers of this commit compacted the same bucket of a "
            f"deletion-vector table; nothing of their compactions was committed")
    for m in compacted:
        assert m.deletion_vector_base is not None
        seen_index, seen_upper = m.deletion_vector_base
        key = (m.partition, m.bucket)
        if sorted(index.get(key, [])) != sorted(seen_index) or sorted(upper.get(key, [])) != sorted(seen_upper):
            raise CommitConflictError(
                f"table {table.name}, partition "
                f"{codec.from_binary(m.partition).path_string() or '(none)'}, bucket {m.bucket}: "
                f"another commit changed the bucket's deletion vectors or compacted files since "
                f"this compaction computed its vectors; nothing was committed")
    added = [e for m in compacted for e in m.deletion_vector_files]
    if not added:
        return None
    replaced = {(m.partition, m.bucket) for m in compacted if m.deletion_vector_files}
    return IndexChanges(added, lambda e: e.index_type == DELETION_VECTORS_INDEX
                        and (e.partition, e.bucket) in replaced)


def check_one_bucket_count(table: FileStore, changes: list[ManifestEntry]) -> None:
    """The files one commit adds to a partition agree on its bucket count (writers that planned a
    new partition's buckets each on their own may not; Paimon refuses such a commit too)."""
    seen: dict[bytes, int] = {}
    for e in changes:
        if e.kind == FileKind.ADD and e.total_buckets > 0 \
                and seen.setdefault(e.partition, e.total_buckets) != e.total_buckets:
            path = table.partition_codec().from_binary(e.partition).path_string() or "(none)"
            raise CommitConflictError(
                f"table {table.name}: Total buckets of partition {path} differ within one commit "
                f"({seen[e.partition]} and {e.total_buckets}): its files were written by writers "
                f"that gave the partition different bucket counts; nothing was committed")


def check_bucket_counts(table: FileStore, changes: list[ManifestEntry], latest: Snapshot | None) -> None:
    """A writer holding an old bucket count must not write into a rescaled partition."""
    check_one_bucket_count(table, changes)
    if latest is None or not any(e.total_buckets > 0 for e in changes):
        return
    current: dict[bytes, int] = {}
    for e in table.manifest_io().live_entries(latest):
        if e.total_buckets > 0:
            current[e.partition] = e.total_buckets
    codec = table.partition_codec()
    for e in changes:
        have = current.get(e.partition)
        if e.total_buckets > 0 and have is not None and have != e.total_buckets:
            raise CommitConflictError(
                f"table {table.name}: Total buckets changed: tried to write partition "
                f"{codec.from_binary(e.partition).path_string() or '(none)'} with {e.total_buckets} "
                f"buckets, but it now has {have} (rescaled by another job); nothing was committed, "
                f"start a new write")


def check_deletes_live(table: FileStore, changes: list[ManifestEntry], live: list[ManifestEntry]) -> None:
    """A compaction deletes only live files, each once."""
    deleted = [e.identifier for e in changes if e.kind == FileKind.DELETE]
    if len(deleted) != len(set(deleted)):
        raise CommitConflictError(
            f"commit to table {table.name} deletes the same file twice: two compactions of "
            f"one bucket in one commit; nothing was committed")
    live_ids = {e.identifier for e in live}
    gone = [e.file.file_name for e in changes
            if e.kind == FileKind.DELETE and e.identifier not in live_ids]
    if gone:
        raise CommitConflictError(
            f"commit to table {table.name} deletes files that are no longer live "
            f"(another compaction or overwrite removed them): {gone[:5]}")


def check_levels_disjoint(table: FileStore, changes: list[ManifestEntry], live: list[ManifestEntry]) -> None:
    """Above level 0 each level of a bucket is one sorted run: after this commit no two of its
    files may overlap in key range (two compactions that raced into the same level would)."""
    schema = table.schema
    if not schema.has_primary_key:
        return
    touched = {(e.partition, e.bucket, e.file.level) for e in changes
               if e.kind == FileKind.ADD and e.file.level > 0}
    if not touched:
        return
    gone = {e.identifier for e in changes if e.kind == FileKind.DELETE}
    key_types = schema.types_of(schema.trimmed_primary_keys)
    by_level: dict[tuple[bytes, int, int], list[ManifestEntry]] = {}
    for e in live + [c for c in changes if c.kind == FileKind.ADD]:
        where = (e.partition, e.bucket, e.file.level)
        if where in touched and e.identifier not in gone:
            by_level.setdefault(where, []).append(e)
    for (_, bucket, level), entries in by_level.items():
        ranges = sorted((comparable_key(deserialize_row(e.file.min_key, key_types)),
                         comparable_key(deserialize_row(e.file.max_key, key_types)), e.file.file_name)
                        for e in entries)
        for (_, hi, a), (lo, _, b) in zip(ranges, ranges[1:], strict=False):
            if lo <= hi:
                raise CommitConflictError(
                    f"commit to table {table.name}: files {a} and {b} of bucket {bucket} would "
                    f"overlap at level {level} (a concurrent compaction wrote there); nothing was committed")
