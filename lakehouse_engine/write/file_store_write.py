"""FileStoreWrite: a TableWrite's bucket writers (TableWrite is its subclass), as Paimon's
AbstractFileStoreWrite, MemoryFileStoreWrite and KeyValueFileStoreWrite hold a table write's
MergeTreeWriters: a writer per (partition, bucket) on first use, numbering its rows above what the
table holds; the memory of all their buffers (over `write-buffer-size`, the largest flush first;
several flush at once); and `prepare_commit`, which compacts the buckets written at once (full at
the commits `full-compaction.delta-commits` names, a DV table's through the lookup, level 0 up
where readers skip it) and assembles each bucket's commit message with what the table's bucket
index adds.

TableWrite (write/table_write.py) makes it from the table's options and the writer's role, and
conforms and routes the rows it is given.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_engine.format.snapshot import BATCH_COMMIT_IDENTIFIER, is_full_compacted_identifier
from lakehouse_engine.options import WRITE_ONLY
from lakehouse_engine.partition import Partition
from lakehouse_engine.threads import parallel_map
from lakehouse_engine.write.bucket_router import RestoredState
from lakehouse_engine.write.bucket_writer import BucketWriter
from lakehouse_engine.write.commit_cycles import CommitCycles
from lakehouse_engine.write.commit_message import CommitMessage, delete_message_files
from lakehouse_engine.write.deletion_vectors import DeletionVectorBase
from lakehouse_engine.write.flush_files import flush_running
from lakehouse_engine.write.flush_staleness import flush_lookup_errors
from lakehouse_engine.write.full_compaction_cadence import (
    FullCompactionCadence,
    buckets_awaiting_full_compaction,
)
from lakehouse_engine.write.latest_state import latest_state

if TYPE_CHECKING:
    import numpy as np

    from lakehouse_engine.bucket.cross_partition import CrossPartitionRouter
    from lakehouse_engine.bucket.dynamic import DynamicBucketAssigner
    from lakehouse_engine.options import CoreOptions
    from lakehouse_engine.partition import PartitionCodec
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.write.bucket_router import BucketRouter
    from lakehouse_engine.write.lookup_prefetch import LookupPrefetch
    from lakehouse_engine.write.write_context import WriteContext
    from lakehouse_engine.write.write_roles import FlushLookup, OutputRole

__all__ = ["FileStoreWrite"]


class FileStoreWrite:
    """The bucket writers of a TableWrite (its base class; TableWrite sets what it is made with):
    their buffers' memory, their flushes, and the commit messages they make."""

    # What TableWrite makes the bucket writers with (see TableWrite.__init__).
    options: CoreOptions
    primary_key: bool
    role: OutputRole
    flush_lookup: FlushLookup | None
    changelog_producer: str
    write_only: bool
    full_compaction_delta_commits: int | None
    buckets: BucketRouter
    partitions: PartitionCodec
    _context: WriteContext
    _dv_compacts: bool
    _replaces_to_top: bool
    _prefetch: LookupPrefetch | None
    _flush_prefetch: LookupPrefetch | None

    def __init__(self, table: FileStore, commit_user: str):
        """No bucket writers yet; what the table holds is read on first use."""
        self.table = table
        self.commit_user = commit_user
        self._writers: dict[tuple[bytes, int], BucketWriter] = {}
        self._buffered_bytes = 0
        self._restored: RestoredState | None = None
        self._current_state: RestoredState | None = None
        #: A DV writer's state at the cycle's first flush lookup (see `_flush_state`).
        self._flush_state_read: RestoredState | None = None
        self._dv_state: tuple[RestoredState, dict[tuple[bytes, int], DeletionVectorBase]] = (RestoredState(), {})
        self._awaiting_restored = False
        self._full_cadence = FullCompactionCadence(table, commit_user)
        #: A stream writer's later cycles check each bucket's levels against the table first.
        self._cycles = CommitCycles(table, commit_user)
        self._closed = False
        self._lock = threading.Lock()

    # ---- restoring what the table already holds -------------------------------------
    def _current(self) -> RestoredState:
        """What the latest snapshot holds now, read once per commit cycle (prepare_commit forgets it)."""
        with self._lock:
            if self._current_state is None:
                self._current_state = RestoredState.read(self.table)
            return self._current_state

    def _flush_state(self) -> RestoredState:
        """What the latest snapshot holds at a DV writer's first flush lookup of the commit cycle
        (read then, once per cycle: a state read at an earlier write may list removed files)."""
        with self._lock:
            if self._flush_state_read is None:
                self._flush_state_read = RestoredState.read(self.table)
            return self._flush_state_read

    def _restore(self) -> RestoredState:
        """What the latest snapshot holds (read on first use, once per writer)."""
        if self._restored is None:
            self._restored = RestoredState.read(self.table)
        return self._restored

    @property
    def assigner(self) -> DynamicBucketAssigner | None:
        """The dynamic bucket assigner, once the writer has used one."""
        return self.buckets.assigner

    @property
    def router(self) -> CrossPartitionRouter | None:
        """The cross-partition router, once the writer has used one."""
        return self.buckets.router

    def dynamic_assigner(self) -> DynamicBucketAssigner:
        """This writer's dynamic bucket assigner (restored from the latest snapshot on first use)."""
        return self.buckets.dynamic_assigner()

    # ---- the bucket writers' buffers --------------------------------------------------
    def _buffer(self, part: Partition, bucket: int, total_buckets: int, rows: pa.Table,
                kinds: np.ndarray) -> None:
        key = (part.binary, bucket)
        writer = self._writers.get(key)
        if writer is None:
            # (A later cycle's new bucket numbers its rows above the bucket's files as they are now.)
            state = self._current() if self._cycles.count else self._restore()
            writer = BucketWriter(self._context, part, bucket, total_buckets,
                                  state.max_sequence.get(key, -1) + 1)
            self._writers[key] = writer
        if self._prefetch is not None and bucket >= 0:
            self._prefetch.start(part, bucket, self._restore().bucket_files.get(key, []), rows)
        elif self._flush_prefetch is not None and bucket >= 0:
            self._flush_prefetch.start(part, bucket, writer.lookup_files(), rows)
        self._buffered_bytes += writer.write(rows, kinds)

    # ---- flushing --------------------------------------------------------------------
    def _flush_until(self, limit: int) -> None:
        """Flush the largest buffers until the buffered bytes fall to `limit` (bounded memory)."""
        chosen, left = [], self._buffered_bytes
        for writer in sorted(self._writers.values(), key=lambda w: w.buffered_bytes, reverse=True):
            if left <= limit:
                break
            chosen.append(writer)
            left -= writer.buffered_bytes
        self._flush_all(chosen)

    def _flush_all(self, writers: list[BucketWriter]) -> None:
        """Flush the buffers of `writers`, several at once: sorting and Parquet encoding release the GIL."""
        parallel_map(self._flush, [w for w in writers if w.has_buffered_rows])

    def _flush(self, writer: BucketWriter) -> None:
        """Flush one bucket's buffer (several run at once): its bytes leave the buffered count first."""
        if not writer.has_buffered_rows:
            return
        with self._lock:
            rows, nbytes = writer.take_buffer()
            self._buffered_bytes -= nbytes
        if self._flush_prefetch is not None:
            self._flush_prefetch.wait(writer.partition, writer.bucket)
        # (flush_lookup_errors: its levels' files replaced and expired mid-cycle?)
        with flush_lookup_errors(self.table, writer), flush_running():
            writer.flush(rows)

    # ---- the commit ------------------------------------------------------------------------
    def prepare_commit(self, commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> list[CommitMessage]:
        """Flush everything buffered and return one CommitMessage per bucket with new files; a
        stream write passes the identifier it commits them under (pypaimon's StreamTableWrite),
        which decides `full-compaction.delta-commits`."""
        messages = []
        self._flush_all(list(self._writers.values()))
        # A snapshot this cycle read (the commit lands above it): the cycles need one, and reading
        # the latest again costs an object store a request or three per commit.
        seen = self._current_state or self._flush_state_read or (self._restored if not self._cycles.count else None)
        known = (seen.latest_snapshot_id or 0) if seen is not None else None
        # The next cycle's lookups see the table as it will be then.
        flushed, self._current_state, self._flush_state_read = self._flush_state_read, None, None
        if self._dv_compacts:
            touched = [w for w in self._writers.values() if w.new_files and w.bucket >= 0]
            if touched and not self.role.replaces:
                # The bucket as it is now (a streaming writer's earlier commits compacted it).
                state = latest_state(self.table, flushed)  # (the flush's read, when no snapshot landed since)
                self._dv_state = (state, DeletionVectorBase.of_snapshot(self.table, state.latest))
            state, bases = self._dv_state
            prefetch = self._prefetch

            def compact(w: BucketWriter) -> None:
                if prefetch is not None:  # the older files' keys read ahead for this bucket
                    prefetch.wait(w.partition, w.bucket)
                w.compact_deletion_vectors(state, bases)

            parallel_map(compact, touched)
        elif self.primary_key and not self.write_only and not self.role.replaces:
            # (An overwrite replaces the partition anyway: compacting what it deletes is waste.)
            full = self._compacts_fully(commit_identifier)
            if full and not self._awaiting_restored:
                self._restore_awaiting_full_compaction(commit_identifier)
            # A bucket owes a full compaction until one of this writer's lands (Paimon's sink).
            self._full_cadence.confirm(self._writers.values())
            for w in self._writers.values():
                if w.new_files and w.bucket >= 0:
                    w.awaits_full_compaction, w.written_at = True, commit_identifier
            touched = [w for w in self._writers.values()
                       if w.bucket >= 0 and (w.new_files or (full and w.awaits_full_compaction))]
            if full and self._full_cadence.unconfirmed(commit_identifier):
                # One of its earlier full compactions never landed: the levels may hold its outputs.
                now = self._current()
                for w in touched:
                    if w.awaits_full_compaction:
                        w.realign_levels(now.bucket_files.get((w.partition.binary, w.bucket), []),
                                         now.latest_snapshot_id or 0)
            parallel_map(lambda w: w.compact_at_commit(full), touched)
            if full and any(w.awaits_full_compaction for w in touched):
                self._full_cadence.submitted(commit_identifier, touched)
        elif (self._context.force_up_level0 or self._replaces_to_top) and not self.options.require(WRITE_ONLY):
            # An overwrite, a rescale or postpone compaction of a table whose readers skip level
            # 0 takes its level 0 up too: else a new stream's first plan would miss its rows (and
            # a full-compaction table's next full compaction would give them again as +I).
            touched = [w for w in self._writers.values() if w.new_files and w.bucket >= 0]
            parallel_map(lambda w: w.take_level0_up(self._replaces_to_top), touched)
        index_bases: dict[bytes, list[str]] = {}
        if self.assigner is not None:
            # What each partition's index was before this commit: the committer checks it is unchanged.
            index_bases = {p: self.assigner.base_index_files(p) for p, _ in self._writers}
        index_changes = self.assigner.prepare_index_files() if self.assigner is not None else {}
        for key, writer in self._writers.items():
            change = index_changes.get(key)
            if not (writer.has_increment or change):
                continue
            message = writer.drain_increment()
            if self.buckets.router is not None:
                message.route_snapshot = self.buckets.router.advance(self.commit_user)
            if self.assigner is not None:
                message.index_base = None if self.assigner.fresh else index_bases[key[0]]
                message.inserted_keys = self.assigner.inserted.pop(key, 0)
                message.updated_keys = self.assigner.updated.pop(key, 0)
                if change is not None:
                    message.new_index_files = [change.entry] + message.new_index_files
                    message.deleted_index_files = [change.replaced] if change.replaced else []
            messages.append(message)
        if self._dv_compacts and self.flush_lookup is not None:
            # The compaction at commit moved this commit's level 0 up and marked older rows: the
            # next flush's lookup must see the bucket (and vectors) as this commit leaves them.
            self._restored = None
            for writer in self._writers.values():
                writer.reset_levels()
        self._cycles.prepared(commit_identifier, bool(messages), known)
        return messages

    def _restore_awaiting_full_compaction(self, commit_identifier: int) -> None:
        """At this writer's first full compaction, also the buckets its commit user wrote since
        its last one (a restarted stream writer: Paimon's keeps them in its Flink state)."""
        self._awaiting_restored = True
        if commit_identifier == BATCH_COMMIT_IDENTIFIER:
            return
        state = self._restore()
        for key, written_at in buckets_awaiting_full_compaction(self.table, self.commit_user,
                                                                self.full_compaction_delta_commits or 1).items():
            if key in self._writers or not state.bucket_files.get(key):
                continue  # written by this writer, or emptied since (a dropped partition)
            writer = BucketWriter(self._context, self.partitions.from_binary(key[0]), key[1],
                                  state.bucket_counts.get(key[0], self.options.bucket),
                                  state.max_sequence.get(key, -1) + 1)
            writer.awaits_full_compaction, writer.written_at = True, written_at
            self._writers[key] = writer

    def _compacts_fully(self, commit_identifier: int) -> bool:
        """Whether the commit of `commit_identifier` compacts every bucket written since the last
        full one fully (Paimon's isFullCompactedIdentifier with `full-compaction.delta-commits`).
        A stream commit of a `full-compaction` producer's table with the option unset does, every
        time, as Paimon's Flink sink (max(-1, 1) = 1); a batch commit then does not, as Spark's."""
        n = self.full_compaction_delta_commits
        if n is None and self.changelog_producer == "full-compaction" and commit_identifier != BATCH_COMMIT_IDENTIFIER:
            n = 1
        return n is not None and is_full_compacted_identifier(commit_identifier, n)

    def abort(self, messages: Iterable[CommitMessage] | None = None) -> None:
        """Delete the files of messages that will never be committed; with no messages (pypaimon's
        `abort()`), the files this writer wrote and has not handed out in messages yet, and close."""

        if messages is None:
            pending = [m for m in (w.uncommitted() for w in self._writers.values()) if m is not None]
            delete_message_files(self.table, pending)
            self.close()
            return
        delete_message_files(self.table, list(messages))

    def close(self) -> None:
        if self._prefetch is not None:
            self._prefetch.close()
        if self._flush_prefetch is not None:
            self._flush_prefetch.close()
        self._writers.clear()
        self._buffered_bytes = 0
        self._closed = True
