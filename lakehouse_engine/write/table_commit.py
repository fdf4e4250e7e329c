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
    LakehouseError,
    SnapshotNotExistError,
    StorageError,
)
from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.features import check_writable
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import (
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
    merge_entries,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.options import (
    COMMIT_MAX_RETRIES,
    COMMIT_MAX_RETRY_WAIT,
    COMMIT_MIN_RETRY_WAIT,
    COMMIT_TIMEOUT,
    DYNAMIC_PARTITION_OVERWRITE,
    MANIFEST_MERGE_MIN_COUNT,
    MANIFEST_TARGET_FILE_SIZE,
    WRITE_ONLY,
)
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.commit_retry import (
    COMPACT,
    RetryGuard,
    SnapshotNotWritten,
    message_entries,
    post_commit_error,
    publish_snapshot,
    storage_error,
)
from lakehouse_engine.write.resequence import Resequencer, check_compaction_sees_older_files

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable

log = logging.getLogger(__name__)
BATCH_COMMIT_IDENTIFIER = 2**63 - 1
APPEND, OVERWRITE = "APPEND", "OVERWRITE"
# Rough encoded size of one manifest entry, to split merged manifests near their target size.
_ENTRY_BYTES_ESTIMATE = 250


class TableCommit:
    """Commits the messages of one write (from any number of processes) as snapshots."""

    def __init__(self, table: FileStoreTable, commit_user: str,
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
        self.bucket_changes: list[dict[str, object]] = []
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
        self._messages = messages
        self.bucket_changes = [
            {"partition": m.partition, "bucket": m.bucket, "inserted": m.inserted_keys, "updated": m.updated_keys}
            for m in messages if m.inserted_keys is not None]
        new_entries, compact_entries = message_entries(messages)
        data_kind = OVERWRITE if self.overwrite_specs is not None else APPEND if new_entries else None
        if self.dynamic_overwrite:
            self._dynamic_partitions = {e.partition for e in new_entries}
            if not new_entries:
                data_kind = None  # nothing written: a dynamic overwrite replaces no partition
        landed = self._retries.filter_committed(messages, new_entries, compact_entries, commit_identifier,
                                                data_kind or APPEND)
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
            if compact_entries:
                sid = landed.get(COMPACT)
                if sid is None:
                    sid = self._commit_compaction(messages, compact_entries, commit_identifier, written)
                if sid is not None:
                    written.append(sid)
        self._committed = self.once
        if written and self.expire is not None and not self.table.options.get(WRITE_ONLY):
            # As Paimon does: expire snapshots past the retention options after each commit.
            self.expire()
        return written

    def _commit_data(self, entries: list[ManifestEntry], kind: str, identifier: int) -> int:
        """Commit the APPEND or OVERWRITE snapshot; an I/O error becomes a StorageError."""
        try:
            sid = self._try_commit(entries, kind, identifier)
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
                return self._try_commit(entries, COMPACT, identifier)
            except CommitConflictError:
                # Another compaction or overwrite got there first. Our compaction output is
                # garbage; the data itself (the APPEND above, if any) is committed and safe.
                delete_message_files(self.table, messages, compaction_only=True)
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

    # ---- the commit loop -----------------------------------------------------------
    def _try_commit(self, entries: list[ManifestEntry], kind: str, identifier: int) -> int | None:
        """Write manifests and race for the next snapshot id until this commit lands or retries run out."""
        snapshots = self.table.snapshot_manager()
        mio = self.table.manifest_io()
        start = time.monotonic()
        delta_meta: ManifestFileMeta | None = None
        base_latest_id: int | None = snapshots.latest_snapshot_id()
        if self._resequencer is None or self._resequencer.messages is not self._messages:
            self._resequencer = Resequencer(self.table, self._messages)
        if kind == COMPACT:
            # A bucket whose new files were re-sequenced lost its writer compaction (old numbers).
            entries = self._resequencer.without_dropped(entries)
            if not entries:
                return None
        attempt = 0
        while True:
            latest = snapshots.latest_snapshot()
            landed = self._already_committed(base_latest_id, latest, identifier, kind) if attempt else None
            if landed is not None:
                return landed
            changes = list(entries)
            # Another engine may have turned on a feature this engine does not apply (deletion
            # vectors, a changelog producer) since the files were written: refuse, publish nothing.
            check_writable(self.table.name, self.table.options, latest, mio.index_entries(latest))
            # The files the latest snapshot holds: read once per attempt, for the kinds that check them.
            live = mio.live_entries(latest) if kind in (OVERWRITE, COMPACT) else []
            overwritten = self._overwrite_deletes(live) if kind == OVERWRITE else []
            changes = overwritten + changes
            if kind != COMPACT and self._resequencer.resequence(changes, latest):
                # Rows of this commit now lie above what landed since they were written (later
                # commit wins); the rewritten files have new names, so the delta manifest too.
                entries, changes = self._resequencer.renamed(entries), self._resequencer.renamed(changes)
                if delta_meta is not None and kind != OVERWRITE:
                    self.table.file_io.delete_file(self.table.path_factory.manifest_path(delta_meta.file_name))
                delta_meta = None
            if kind == COMPACT:
                self._check_deletes_live(changes, live)
                self._check_levels_disjoint(changes, live)
                check_compaction_sees_older_files(self.table, changes, live)
            if kind == APPEND:
                self._check_bucket_counts(changes, latest)
            index_manifest, index_files = self._index_manifest(latest, kind, overwritten)
            new_files: list[str] = []
            if kind == OVERWRITE or delta_meta is None:
                delta_meta = mio.write_manifest(changes) if changes else None
                if delta_meta is not None and kind == OVERWRITE:
                    new_files.append(delta_meta.file_name)
            base_metas = mio.data_manifests(latest) if latest else []
            if len(base_metas) > self.merge_min_count:
                base_metas = self._merge_manifests(base_metas, new_files)
            base_name, base_size = mio.write_manifest_list(base_metas)
            delta_name, delta_size = mio.write_manifest_list([delta_meta] if delta_meta else [])
            new_files += [base_name, delta_name] + index_files
            added = sum(e.file.row_count for e in changes if e.kind == FileKind.ADD)
            deleted = sum(e.file.row_count for e in changes if e.kind == FileKind.DELETE)
            new_id = (latest.id if latest else 0) + 1
            snapshot = Snapshot(
                # As Paimon: the latest schema when the snapshot is made, which a time-travel read
                # of it uses; a writer holding an older schema wrote files tagged with theirs.
                id=new_id, schema_id=self.table.schema_manager().latest_id_from(
                    max(self.table.schema.id, latest.schema_id if latest else 0)),
                base_manifest_list=base_name, delta_manifest_list=delta_name,
                total_record_count=((latest.total_record_count or 0) if latest else 0) + added - deleted,
                delta_record_count=added - deleted,
                commit_user=self.commit_user, commit_identifier=identifier, commit_kind=kind,
                time_millis=int(time.time() * 1000),
                base_manifest_list_size=base_size, delta_manifest_list_size=delta_size,
                index_manifest=index_manifest,
            )
            path = self.table.path_factory.snapshot_path(new_id)
            try:
                put_millis = int(time.time() * 1000)
                published = self._publish(path, snapshot)
            except SnapshotNotWritten:
                # It did not land, so nothing references this attempt's manifests (best effort:
                # the disk may be full; orphan removal gets whatever stays).
                with contextlib.suppress(OSError):
                    for name in new_files + ([delta_meta.file_name] if delta_meta else []):
                        self.table.file_io.delete_file(self.table.path_factory.manifest_path(name))
                raise
            if published and latest is not None and snapshots.reused_expired_id(new_id, put_millis):
                # The id was one a concurrent expiry had deleted, not the next one: this snapshot
                # is outside the table's chain and must not be acknowledged. Take it back, retry.
                self.table.file_io.delete_file(path, quiet=False)
                published = False
            if published:
                snapshots.commit_latest_hint(new_id)
                return new_id
            # Another committer took this id: our lists (and merged manifests) are garbage now.
            for name in new_files:
                if delta_meta is None or name != delta_meta.file_name or kind == OVERWRITE:
                    self.table.file_io.delete_file(self.table.path_factory.manifest_path(name))
            if kind == OVERWRITE:
                delta_meta = None
            attempt += 1
            elapsed_ms = (time.monotonic() - start) * 1000
            if attempt > self.max_retries or (self.timeout_ms is not None and elapsed_ms > self.timeout_ms):
                if delta_meta is not None:
                    self.table.file_io.delete_file(self.table.path_factory.manifest_path(delta_meta.file_name))
                raise CommitTimeoutError(
                    f"commit to table {self.table.name} lost the race for a snapshot id {attempt} "
                    f"time(s) in {elapsed_ms:.0f} ms (commit.max-retries={self.max_retries}); "
                    f"nothing was committed")
            wait = min(self.max_wait_ms, self.min_wait_ms * (2 ** min(attempt, 20)))
            time.sleep(wait * random.uniform(0.5, 1.0) / 1000.0)

    def _publish(self, path: str, snapshot: Snapshot) -> bool:
        """Put-if-absent the snapshot file: True when it landed, False on a lost race; any other
        failure raises (a full disk is not a lost race)."""
        return publish_snapshot(self.table, path, snapshot)

    def _index_manifest(self, latest: Snapshot | None, kind: str,
                        overwritten: list[ManifestEntry]) -> tuple[str | None, list[str]]:
        """The index manifest of the new snapshot (and the new files it took), checking that no
        other dynamic-bucket writer changed the index of a partition this commit extends
        (`overwritten`: the DELETE entries of an overwrite)."""
        current = latest.index_manifest if latest else None
        added = [e for m in self._messages for e in m.new_index_files]
        if kind == COMPACT or (not added and kind != OVERWRITE):
            return current, []
        mio = self.table.manifest_io()
        entries = mio.read_index_manifest(current) if current else []
        if kind == OVERWRITE:
            doomed = {e.partition for e in overwritten}
            doomed |= {e.partition for e in added}
            if not added and not any(e.partition in doomed for e in entries):
                return current, []
            kept = [e for e in entries if e.partition not in doomed]
        else:
            by_partition: dict[bytes, set[str]] = {}
            for e in entries:
                by_partition.setdefault(e.partition, set()).add(e.file_name)
            codec = self.table.partition_codec()
            for m in self._messages:
                changed = m.index_base is not None and by_partition.get(m.partition, set()) != set(m.index_base)
                if m.new_index_files and changed:
                    raise CommitConflictError(
                        f"table {self.table.name}, partition "
                        f"{codec.from_binary(m.partition).path_string() or '(none)'}: another writer "
                        f"assigned new keys to dynamic buckets since this write started, so this "
                        f"commit could duplicate keys; nothing was committed, write the batch again")
            replaced = {(e.partition, e.bucket) for e in added}
            kept = [e for e in entries if (e.partition, e.bucket) not in replaced]
        name = mio.write_index_manifest(kept + added)
        return name, [name]

    def _check_bucket_counts(self, changes: list[ManifestEntry], latest: Snapshot | None) -> None:
        """A writer holding an old bucket count must not write into a rescaled partition."""
        if latest is None or not any(e.total_buckets > 0 for e in changes):
            return
        current: dict[bytes, int] = {}
        for e in self.table.manifest_io().live_entries(latest):
            if e.total_buckets > 0:
                current[e.partition] = e.total_buckets
        codec = self.table.partition_codec()
        for e in changes:
            have = current.get(e.partition)
            if e.total_buckets > 0 and have is not None and have != e.total_buckets:
                raise CommitConflictError(
                    f"table {self.table.name}: tried to write partition "
                    f"{codec.from_binary(e.partition).path_string() or '(none)'} with {e.total_buckets} "
                    f"buckets, but it now has {have} (rescaled by another job); nothing was committed, "
                    f"start a new write")

    def _already_committed(self, base_id: int | None, latest: Snapshot | None, identifier: int,
                           kind: str) -> int | None:
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

    def _overwrite_deletes(self, live: list[ManifestEntry]) -> list[ManifestEntry]:
        """DELETE entries for every live file in the partitions being overwritten."""
        specs = self.overwrite_specs or [{}]
        codec = self.table.partition_codec()
        out = []
        for e in live:
            if self.dynamic_overwrite:
                if e.partition not in self._dynamic_partitions:
                    continue
            elif not codec.from_binary(e.partition).matches(specs):
                continue
            out.append(ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file))
        return out

    def _check_deletes_live(self, changes: list[ManifestEntry], live: list[ManifestEntry]) -> None:
        deleted = [e.identifier for e in changes if e.kind == FileKind.DELETE]
        if len(deleted) != len(set(deleted)):
            raise CommitConflictError(
                f"commit to table {self.table.name} deletes the same file twice: two compactions of "
                f"one bucket in one commit; nothing was committed")
        live_ids = {e.identifier for e in live}
        gone = [e.file.file_name for e in changes
                if e.kind == FileKind.DELETE and e.identifier not in live_ids]
        if gone:
            raise CommitConflictError(
                f"commit to table {self.table.name} deletes files that are no longer live "
                f"(another compaction or overwrite removed them): {gone[:5]}")

    def _check_levels_disjoint(self, changes: list[ManifestEntry], live: list[ManifestEntry]) -> None:
        """Above level 0 each level of a bucket is one sorted run: after this commit no two of its
        files may overlap in key range (two compactions that raced into the same level would)."""
        schema = self.table.schema
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
                        f"commit to table {self.table.name}: files {a} and {b} of bucket {bucket} would "
                        f"overlap at level {level} (a concurrent compaction wrote there); nothing was committed")

    def _merge_manifests(self, metas: list[ManifestFileMeta], new_files: list[str]) -> list[ManifestFileMeta]:
        """Rewrite many small manifests as few: merged ADD entries only, near the target size each."""
        mio = self.table.manifest_io()
        live = [e for e in merge_entries(mio.read_entries(metas)) if e.kind == FileKind.ADD]
        per_file = max(1, self.manifest_target // _ENTRY_BYTES_ESTIMATE)
        merged = []
        for i in range(0, len(live), per_file):
            meta = mio.write_manifest(live[i:i + per_file])
            new_files.append(meta.file_name)
            merged.append(meta)
        return merged


def delete_message_files(table: FileStoreTable, messages: Sequence[CommitMessage],
                         compaction_only: bool = False) -> None:
    """Delete the files `messages` wrote, which will not be committed.

    A file a compaction only moved up a level is the same physical file as its committed
    original and is never deleted. With `compaction_only`, the new data files and index files
    (committed by the APPEND before the compaction) are kept too.
    """
    codec = table.partition_codec()
    for m in messages:
        d = table.path_factory.bucket_dir(codec.from_binary(m.partition).spec, m.bucket)
        upgraded = {f.file_name for f in m.compact_before}
        written = [f for f in m.compact_after if f.file_name not in upgraded]
        if not compaction_only:
            written += m.new_files
            for e in m.new_index_files:
                table.file_io.delete_file(f"{table.path_factory.index_dir}/{e.file_name}")
        for f in written:
            table.file_io.delete_file(f"{d}/{f.file_name}")

