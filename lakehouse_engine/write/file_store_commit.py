"""FileStoreCommit: commit one planner's changes as the next snapshot, as Paimon's
FileStoreCommitImpl tries its commits: write the manifests (merging many small ones, as Paimon's
ManifestFileMerger), the index manifest and the changelog manifest list, race for the next snapshot
id, and retry on the latest snapshot with backoff until it lands or `commit.max-retries` /
`commit.timeout` run out.

TableCommit (write/table_commit.py) decides what to commit (the data, then its compaction) and
hands each planner to this loop.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakehouse_engine.errors import (
    CommitTimeoutError,
    CorruptFileError,
    SnapshotNotExistError,
)
from lakehouse_engine.format.features import check_writable
from lakehouse_engine.format.manifest_entries import FileKind, ManifestEntry, ManifestFileMeta
from lakehouse_engine.format.snapshot import CommitKind, Snapshot
from lakehouse_engine.options import (
    COMMIT_MAX_RETRIES,
    COMMIT_MAX_RETRY_WAIT,
    COMMIT_MIN_RETRY_WAIT,
    COMMIT_TIMEOUT,
    MANIFEST_MERGE_MIN_COUNT,
    MANIFEST_TARGET_FILE_SIZE,
)
from lakehouse_engine.write.commit_planners import CommitPlanner, IndexChanges
from lakehouse_engine.write.commit_retry import SnapshotNotWritten, publish_snapshot

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["FileStoreCommit"]

# Rough encoded size of one manifest entry, to split merged manifests near their target size.
_ENTRY_BYTES_ESTIMATE = 250


class FileStoreCommit:
    """The commit loop of one commit user of a table: each planner's changes become one snapshot."""

    def __init__(self, table: FileStore, commit_user: str):
        """The loop of `commit_user`'s commits to `table`, with the table's commit and manifest options."""
        self.table = table
        self.commit_user = commit_user
        opts = table.schema.core_options
        self.max_retries = opts.require(COMMIT_MAX_RETRIES)
        self.timeout_ms = opts.get(COMMIT_TIMEOUT)
        self.min_wait_ms = opts.require(COMMIT_MIN_RETRY_WAIT)
        self.max_wait_ms = opts.require(COMMIT_MAX_RETRY_WAIT)
        self.merge_min_count = opts.require(MANIFEST_MERGE_MIN_COUNT)
        self.manifest_target = opts.require(MANIFEST_TARGET_FILE_SIZE)

    def try_commit(self, planner: CommitPlanner, identifier: int) -> int | None:
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
