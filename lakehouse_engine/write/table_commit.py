"""TableCommit: turn CommitMessages into manifests and one atomic snapshot, with bounded retries."""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from lakehouse_engine.errors import (
    CommitConflictError,
    CommitTimeoutError,
    CorruptFileError,
    LakehouseError,
    SnapshotNotExistError,
    StorageError,
    UnsupportedFeatureError,
)
from lakehouse_engine.format.features import check_writable
from lakehouse_engine.format.manifest_entries import (
    DataFileMeta,
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
)
from lakehouse_engine.format.snapshot import CommitKind, Snapshot
from lakehouse_engine.options import (
    CHANGELOG_PRODUCER,
    COMMIT_MAX_RETRIES,
    COMMIT_MAX_RETRY_WAIT,
    COMMIT_MIN_RETRY_WAIT,
    COMMIT_TIMEOUT,
    DYNAMIC_PARTITION_OVERWRITE,
    MANIFEST_MERGE_MIN_COUNT,
    MANIFEST_TARGET_FILE_SIZE,
    MERGE_ENGINE,
    WRITE_ONLY,
)
from lakehouse_engine.write.commit_message import CommitMessage, delete_message_files
from lakehouse_engine.write.commit_planners import (
    AppendPlanner,
    CommitPlanner,
    CompactPlanner,
    IndexChanges,
    OverwritePlanner,
)
from lakehouse_engine.write.commit_retry import (
    RetryGuard,
    SnapshotNotWritten,
    message_entries,
    post_commit_error,
    publish_snapshot,
    storage_error,
)
from lakehouse_engine.write.cross_partition_commit import dynamic_overwrite_partitions
from lakehouse_engine.write.deletion_vectors import (
    DeletionVectorBase,
    DeletionVectorCompactor,
    deletion_vectors_enabled,
)
from lakehouse_engine.write.first_row_check import BucketLevel0Up, first_row_level0_up
from lakehouse_engine.write.level0_changelog import level0_changelog_of, lookup_level0_up
from lakehouse_engine.write.resequence import Resequencer

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)
BATCH_COMMIT_IDENTIFIER = 2**63 - 1
# Rough encoded size of one manifest entry, to split merged manifests near their target size.
_ENTRY_BYTES_ESTIMATE = 250


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
        self.max_retries = opts.require(COMMIT_MAX_RETRIES)
        self.timeout_ms = opts.get(COMMIT_TIMEOUT)
        self.min_wait_ms = opts.require(COMMIT_MIN_RETRY_WAIT)
        self.max_wait_ms = opts.require(COMMIT_MAX_RETRY_WAIT)
        self.merge_min_count = opts.require(MANIFEST_MERGE_MIN_COUNT)
        self.manifest_target = opts.require(MANIFEST_TARGET_FILE_SIZE)
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
        if self._maintains_deletion_vectors():
            self._check_deletion_vectors_maintained(messages)
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
            self._drop_changelog_without_compaction(messages)
            if compact_entries or any(m.compact_changelog for m in messages):
                sid = compacted = landed.get(CommitKind.COMPACT)
                if sid is None:
                    sid = compacted = self._commit_compaction(messages, compact_entries, commit_identifier, written)
                if sid is not None:
                    written.append(sid)
            if written and self._maintains_deletion_vectors():
                written += self._settle_level0(messages, commit_identifier, written, self._deletion_vector_compaction)
            elif written and self._takes_first_row_level0_up() and self._level0_left(messages, compacted):
                # The writer's first-row compaction lost to a concurrent commit or was dropped: take
                # the bucket's level 0 up again against what landed (readers of first-row skip it).
                written += self._settle_level0(messages, commit_identifier, written,
                                               lambda _: first_row_level0_up(self.table, self.commit_user),
                                               must_land=False)
            elif written and self._takes_lookup_level0_up() and self._level0_left(messages, compacted):
                # Level 0 the writer did not take up (a write-only writer's, a Spark data source
                # task's, a compaction that lost a race) goes up now with its changelog, as Paimon's
                # write of a `lookup` table compacts (its first stream plan skips level 0). An
                # overwrite's rows give no changelog (streams skip overwrites).
                changelog = self.overwrite_specs is None
                written += self._settle_level0(messages, commit_identifier, written,
                                               lambda _: lookup_level0_up(self.table, self.commit_user, changelog),
                                               must_land=False)
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

    def _maintains_deletion_vectors(self) -> bool:
        opts = self.table.options
        return (self.table.schema.has_primary_key and deletion_vectors_enabled(opts)
                and not opts.get(WRITE_ONLY))

    def _check_deletion_vectors_maintained(self, messages: list[CommitMessage]) -> None:
        """A compaction into a DV table that kept no vectors (its writer saw the table without
        them) would show the rows it replaced again: refused before anything lands."""
        for m in messages:
            if (m.compact_before or m.compact_after) and m.deletion_vector_base is None:
                raise UnsupportedFeatureError(
                    f"table {self.table.name}: bucket {m.bucket} was compacted by a writer that did "
                    f"not maintain deletion vectors (the table's 'deletion-vectors.enabled' was "
                    f"turned on since the write started); nothing was committed, write again")

    @staticmethod
    def _level0_left(messages: list[CommitMessage], compacted: int | None) -> bool:
        """Whether a bucket this commit wrote may have kept level-0 files: the COMPACT did not
        land, or a message's new files came without a compaction of their bucket."""
        return compacted is None or any(m.new_files and m.bucket >= 0 and not (m.compact_before or m.compact_after)
                                        for m in messages)

    def _takes_lookup_level0_up(self) -> bool:
        opts = self.table.options
        return (self.table.schema.has_primary_key and opts.require(CHANGELOG_PRODUCER) == "lookup"
                and not opts.get(WRITE_ONLY))

    def _drop_changelog_without_compaction(self, messages: list[CommitMessage]) -> None:
        """A `lookup` changelog lands only with the compaction taking its level-0 files up (Paimon's
        invariant: a level-0 file listed has not given its changelog): a message whose compaction
        was skipped or dropped loses its changelog, and its files give it when they go up."""
        if self.table.options.require(CHANGELOG_PRODUCER) != "lookup":
            return
        for m in messages:
            if m.compact_changelog and not (m.compact_before or m.compact_after):
                delete_message_files(self.table, [CommitMessage(m.partition, m.bucket, m.total_buckets,
                                                                compact_changelog=m.compact_changelog)],
                                     compaction_only=True)
                m.compact_changelog = []

    def _takes_first_row_level0_up(self) -> bool:
        opts = self.table.options
        return (self.table.schema.has_primary_key and opts.require(MERGE_ENGINE) == "first-row"
                and not opts.get(WRITE_ONLY))

    def _deletion_vector_compaction(self, latest: Snapshot | None) -> BucketLevel0Up:
        """A DV bucket's level 0 up through the lookup, vectors marked against `latest`'s."""
        bases = DeletionVectorBase.of_snapshot(self.table, latest)
        codec = self.table.partition_codec()
        # The level-0 changelog of a `lookup` table (an overwrite's rows give none).
        level0_changelog = (level0_changelog_of(self.table, lambda: latest) if self.overwrite_specs is None
                            else None)

        def compact(key: tuple[bytes, int], total: int, files: list[DataFileMeta]) -> CommitMessage | None:
            base = bases.get(key, DeletionVectorBase())
            done = DeletionVectorCompactor(self.table, codec.from_binary(key[0]), key[1], base,
                                           level0_changelog=level0_changelog).compact(files)
            if done is None:
                return None
            return CommitMessage(key[0], key[1], total, compact_before=done.before, compact_after=done.after,
                                 compact_changelog=done.changelog_files, deletion_vector_files=done.index_files,
                                 deletion_vector_base=(list(base.index_files), list(base.upper_files)),
                                 commit_user=self.commit_user)

        return compact

    def _settle_level0(self, messages: list[CommitMessage], identifier: int, written: list[int],
                       compaction: Callable[[Snapshot | None], BucketLevel0Up], must_land: bool = True) -> list[int]:
        """The buckets this commit wrote must end with no level-0 file where readers skip level 0
        (a DV table's, a first-row table's for Paimon, a `lookup` table's first stream plan): when
        the writer's compaction lost to a concurrent commit (its lookup against a stale base) or was
        dropped, or its writer left level 0 (write-only), compact those buckets again against what
        landed (`compaction(latest)` compacts one, a `lookup` table's giving the changelog of the
        level 0 it takes up), until it lands. Returns the ids of the COMPACT snapshots it
        committed. When it keeps losing: a PostCommitError (`must_land`: our reads of a DV table
        skip level 0), else a warning (the rows stay visible to our batch reads, and level 0
        gives its changelog at the next compaction)."""
        buckets = {(m.partition, m.bucket): m.total_buckets for m in messages if m.new_files and m.bucket >= 0}
        ids: list[int] = []
        if not buckets:
            return ids
        for _ in range(self.max_retries + 1):
            latest = self.table.snapshot_manager().latest_snapshot()
            files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
            for e in self.table.manifest_io().live_entries(latest):
                if (e.partition, e.bucket) in buckets:
                    files.setdefault((e.partition, e.bucket), []).append(e.file)
            pending = sorted(k for k, fs in files.items() if any(f.level == 0 for f in fs))
            if not pending:
                return ids
            compact = compaction(latest)
            again = [m for m in (compact(key, buckets[key], files[key]) for key in pending) if m is not None]
            if not again:
                return ids
            _, entries = message_entries(again)
            planner = CompactPlanner(self.table, entries, again, Resequencer(self.table, again))
            try:
                sid = self._try_commit(planner, identifier)
            except CommitConflictError as exc:
                log.info("table %s: lookup compaction of this commit's buckets retried: %s", self.table.name, exc)
                delete_message_files(self.table, again, compaction_only=True)
                continue
            except (OSError, LakehouseError) as exc:
                delete_message_files(self.table, again, compaction_only=True)
                raise post_commit_error(self.table, written + ids, exc) from exc
            if sid is not None:
                ids.append(sid)
        lost = CommitConflictError(
            f"table {self.table.name}: the lookup compaction of the buckets this commit wrote lost "
            f"to concurrent commits {self.max_retries + 1} times; their new rows stay in level 0, "
            f"invisible to readers that skip it until the next write or compaction of those buckets")
        if not must_land:
            log.warning("%s", lost)
            return ids
        raise post_commit_error(self.table, written + ids, lost) from lost

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

    # ---- the commit loop -----------------------------------------------------------
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
        """Race for the next snapshot id with the planner's changes until this commit lands or
        retries run out; None when the planner has nothing to commit."""
        snapshots = self.table.snapshot_manager()
        mio = self.table.manifest_io()
        start = time.monotonic()
        delta: ManifestFileMeta | None = None
        base_latest_id: int | None = snapshots.latest_snapshot_id()
        if not planner.prepare():
            return None
        attempt = 0
        while True:
            latest = snapshots.latest_snapshot()
            landed = self._already_committed(base_latest_id, latest, identifier, planner.kind) if attempt else None
            if landed is not None:
                return landed
            # Manifest files of this attempt only: garbage when it loses the race.
            new_files: list[str] = []
            try:
                # Another engine may have turned on a feature this engine does not apply (deletion
                # vectors, a changelog producer) since the files were written: refuse, publish nothing.
                check_writable(self.table.name, self.table.options, latest, mio.index_entries(latest),
                               self.table.schema.has_primary_key)
                planned = planner.plan(latest)
                if planned.delta_stale and delta is not None:
                    self._delete_manifests([delta.file_name])
                    delta = None
                index_manifest = self._index_manifest(latest, planned.index, new_files)
                if delta is None:
                    delta = mio.write_manifest(planned.changes) if planned.changes else None
                    if delta is not None and planner.delta_per_attempt:
                        new_files.append(delta.file_name)
                base_metas = mio.data_manifests(latest) if latest else []
                if len(base_metas) > self.merge_min_count:
                    base_metas = self._merge_manifests(base_metas, new_files)
            except CorruptFileError:
                if latest is None or snapshots.snapshot_exists(latest.id):
                    raise
                # `latest` was expired (its manifests deleted) while this attempt read it: many
                # commits landed meanwhile. Not damage: plan again on the snapshot that is latest now.
                self._delete_manifests(new_files)
                if planner.delta_per_attempt:
                    delta = None
                attempt += 1
                continue
            base_name, base_size = mio.write_manifest_list(base_metas)
            delta_name, delta_size = mio.write_manifest_list([delta] if delta else [])
            new_files += [base_name, delta_name]
            changelog = self._changelog_manifest_list(planned.changelog, new_files)
            snapshot = self._snapshot(latest, planner.kind, identifier, planned.changes,
                                      (base_name, base_size), (delta_name, delta_size), index_manifest, changelog)
            path = self.table.path_factory.snapshot_path(snapshot.id)
            try:
                put_millis = int(time.time() * 1000)
                # A base an expiry deleted while this attempt planned means the next id may be one
                # it freed too (a put there would land outside the chain, and after the put that
                # is not always decidable): do not put, plan again on the latest.
                base_gone = latest is not None and not snapshots.snapshot_exists(latest.id)
                published = not base_gone and publish_snapshot(self.table, path, snapshot)
            except SnapshotNotWritten:
                # It did not land, so nothing references this attempt's manifests (best effort:
                # the disk may be full; orphan removal gets whatever stays).
                with contextlib.suppress(OSError):
                    self._delete_manifests(new_files + ([delta.file_name] if delta else []))
                raise
            if published and latest is not None and snapshots.reused_expired_id(snapshot.id, put_millis):
                # The id was one a concurrent expiry had deleted, not the next one: this snapshot
                # is outside the table's chain and must not be acknowledged. Take it back, retry.
                self.table.file_io.delete_file(path, quiet=False)
                published = False
            if published:
                snapshots.commit_latest_hint(snapshot.id)
                return snapshot.id
            # Another committer took this id: our lists (and merged manifests) are garbage now;
            # a delta manifest that does not depend on the latest snapshot is kept for the retry.
            self._delete_manifests(new_files)
            if planner.delta_per_attempt:
                delta = None
            attempt += 1
            elapsed_ms = (time.monotonic() - start) * 1000
            if attempt > self.max_retries or (self.timeout_ms is not None and elapsed_ms > self.timeout_ms):
                if delta is not None:
                    self._delete_manifests([delta.file_name])
                raise CommitTimeoutError(
                    f"commit to table {self.table.name} lost the race for a snapshot id {attempt} "
                    f"time(s) in {elapsed_ms:.0f} ms (commit.max-retries={self.max_retries}); "
                    f"nothing was committed")
            wait = min(self.max_wait_ms, self.min_wait_ms * (2 ** min(attempt, 20)))
            time.sleep(wait * random.uniform(0.5, 1.0) / 1000.0)

    def _snapshot(self, latest: Snapshot | None, kind: CommitKind, identifier: int,
                  changes: list[ManifestEntry], base: tuple[str, int], delta: tuple[str, int],
                  index_manifest: str | None, changelog: tuple[str, int, int] | None) -> Snapshot:
        """The snapshot after `latest` this attempt publishes."""
        added = sum(e.file.row_count for e in changes if e.kind == FileKind.ADD)
        deleted = sum(e.file.row_count for e in changes if e.kind == FileKind.DELETE)
        return Snapshot(
            # As Paimon: the latest schema when the snapshot is made, which a time-travel read
            # of it uses; a writer holding an older schema wrote files tagged with theirs.
            id=(latest.id if latest else 0) + 1, schema_id=self.table.schema_manager().latest_id_from(
                max(self.table.schema.id, latest.schema_id if latest else 0)),
            base_manifest_list=base[0], delta_manifest_list=delta[0],
            total_record_count=((latest.total_record_count or 0) if latest else 0) + added - deleted,
            delta_record_count=added - deleted,
            commit_user=self.commit_user, commit_identifier=identifier, commit_kind=kind.value,
            time_millis=int(time.time() * 1000),
            base_manifest_list_size=base[1], delta_manifest_list_size=delta[1],
            index_manifest=index_manifest,
            changelog_manifest_list=changelog[0] if changelog else None,
            changelog_manifest_list_size=changelog[1] if changelog else None,
            changelog_record_count=changelog[2] if changelog else None,
        )

    def _delete_manifests(self, names: Sequence[str]) -> None:
        for name in dict.fromkeys(names):
            self.table.file_io.delete_file(self.table.path_factory.manifest_path(name))

    def _index_manifest(self, latest: Snapshot | None, changes: IndexChanges | None,
                        new_files: list[str]) -> str | None:
        """The index manifest of the new snapshot: the latest one's, with `changes` applied
        (a new index manifest, added to `new_files`, only when something changed)."""
        current = latest.index_manifest if latest else None
        if changes is None:
            return current
        mio = self.table.manifest_io()
        entries = mio.read_index_manifest(current) if current else []
        kept = [e for e in entries if not changes.removes(e)]
        if not changes.added and len(kept) == len(entries):
            return current
        name = mio.write_index_manifest(kept + changes.added)
        new_files.append(name)
        return name

    def _changelog_manifest_list(self, changelog: list[ManifestEntry],
                                 new_files: list[str]) -> tuple[str, int, int] | None:
        """The changelog manifest list of the new snapshot (name, size, record count), None when
        the commit has no changelog files."""
        if not changelog:
            return None
        mio = self.table.manifest_io()
        meta = mio.write_manifest(changelog)
        new_files.append(meta.file_name)
        name, size = mio.write_manifest_list([meta])
        new_files.append(name)
        return name, size, sum(e.file.row_count for e in changelog)

    def _already_committed(self, base_id: int | None, latest: Snapshot | None, identifier: int,
                           kind: CommitKind) -> int | None:
        """The id of a snapshot after `base_id` that is ours (same user, identifier and kind)."""
        if latest is None:
            return None
        snapshots = self.table.snapshot_manager()
        for sid in range(latest.id, (base_id or 0), -1):
            try:
                s = snapshots.snapshot(sid)
            except SnapshotNotExistError:
                # Expired by a concurrent expiry: snapshots newer than our base that are already
                # gone cannot be an attempt of ours still in doubt; older ones are gone too.
                break
            if (s.commit_user == self.commit_user and s.commit_identifier == identifier
                    and s.commit_kind == kind):
                return sid
        return None

    def _merge_manifests(self, metas: list[ManifestFileMeta], new_files: list[str]) -> list[ManifestFileMeta]:
        """Rewrite many small manifests as few: merged ADD entries only, near the target size each."""
        mio = self.table.manifest_io()
        live = [e for e in mio.merged_entries(metas) if e.kind == FileKind.ADD]
        per_file = max(1, self.manifest_target // _ENTRY_BYTES_ESTIMATE)
        merged = []
        for i in range(0, len(live), per_file):
            meta = mio.write_manifest(live[i:i + per_file])
            new_files.append(meta.file_name)
            merged.append(meta)
        return merged

