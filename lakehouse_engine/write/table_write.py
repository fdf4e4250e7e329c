"""TableWrite: route rows to (partition, bucket) and their bucket writers, bound the memory of all
their buffers, flush and compact several buckets at once, and assemble the commit messages.

Each bucket's own work (its buffer, flush, levels, compaction and its part of the commit message)
is its BucketWriter's (write/bucket_writer.py), as Paimon's MergeTreeWriter is one bucket of its
KeyValueFileStoreWrite.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import InvalidDataError, LakehouseError, SchemaError, UnsupportedError
from lakehouse_engine.format.features import refused_options
from lakehouse_engine.format.snapshot import BATCH_COMMIT_IDENTIFIER, is_full_compacted_identifier
from lakehouse_engine.mergetree.changelog import changelog_producer, check_producer_options
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, cache_for
from lakehouse_engine.mergetree.merge import ROW_KIND_CODES, take_rows
from lakehouse_engine.options import (
    FULL_COMPACTION_DELTA_COMMITS,
    MERGE_ENGINE,
    ROWKIND_FIELD,
    WRITE_BUFFER_SIZE,
    WRITE_ONLY,
)
from lakehouse_engine.partition import Partition, PartitionCodec
from lakehouse_engine.schema import BucketMode
from lakehouse_engine.threads import cores, parallel_map
from lakehouse_engine.write.batch_input import conform_to_schema
from lakehouse_engine.write.bucket_router import BucketRouter, RestoredState
from lakehouse_engine.write.bucket_writer import BucketWriter, WriteContext
from lakehouse_engine.write.commit_cycles import CommitCycles
from lakehouse_engine.write.commit_message import CommitMessage, delete_message_files
from lakehouse_engine.write.deletion_vectors import (
    DeletionVectorBase,
    deletion_vectors_enabled,
)
from lakehouse_engine.write.flush_staleness import flush_lookup_errors
from lakehouse_engine.write.full_compaction_cadence import (
    FullCompactionCadence,
    buckets_awaiting_full_compaction,
)
from lakehouse_engine.write.latest_state import latest_state
from lakehouse_engine.write.lookup_prefetch import LookupPrefetch
from lakehouse_engine.write.pandas_input import arrow_from_pandas
from lakehouse_engine.write.write_roles import (
    COMPACTION_OUTPUT,
    NEW_DATA,
    OVERWRITE_DATA,
    REWRITE,
    TABLE_BUCKETS,
    BucketAssignment,
    DynamicAssigner,
    FixedBuckets,
    FlushLookup,
    OutputRole,
    assigner_of,
)

if TYPE_CHECKING:
    from lakehouse_engine.bucket.cross_partition import CrossPartitionRouter
    from lakehouse_engine.bucket.dynamic import DynamicBucketAssigner
    from lakehouse_engine.store.file_store import FileStore

# Rows of the smallest slice an oversized batch is cut into: a small batch stays one sorted run
# whatever the buffer size (as a flush after each batch makes it).
_MIN_SLICE_ROWS = 1 << 16


class TableWrite:
    """Writes batches into a table's buckets; `prepare_commit` returns the CommitMessages to commit."""

    def __init__(self, table: FileStore, commit_user: str,
                 buckets: BucketAssignment = TABLE_BUCKETS, role: OutputRole = NEW_DATA,
                 flush_lookup: FlushLookup | None = None):
        """A writer for `table` under `commit_user`.

        Args:
            buckets: how rows get their bucket: the table's mode, fixed counts per partition
                (postpone compaction, rescale) or assigner i of n (a dynamic-bucket table written
                by n processes at once).
            role: what the files are to the commit: new data, data replacing partitions, a
                rewrite, or a compaction's output.
            flush_lookup: looks up each flushed run in the bucket's older levels; what it makes
                (index files) goes into the bucket's commit message.
        """
        self.table = table
        self.schema = table.schema
        self.commit_user = commit_user
        opts = self.schema.core_options
        self.options = opts
        refused_options(table.name, opts.raw, for_write=True)  # before any file is written
        self.primary_key = self.schema.has_primary_key
        self.role = role
        self.flush_lookup = flush_lookup
        # What changelog this writer produces: none for rows that replace or move (an overwrite
        # is read as no change; a compaction's output is not new input) or that wait in
        # bucket-postpone; rows postpone compaction brings into the buckets get theirs there
        # (Paimon's postpone compaction writes with the table's own bucket writers).
        producer = changelog_producer(opts) if self.primary_key else "none"
        moved = role.replaces or (role.compaction_output and not role.first_arrival)
        postponed = table.bucket_mode() == BucketMode.POSTPONE_MODE and not isinstance(buckets, FixedBuckets)
        # A `lookup` writer that leaves its rows in level 0 (`write-only`) makes none either: the
        # compaction that takes them up gives their changelog (Paimon's; write/level0_changelog.py).
        leaves_level0 = producer == "lookup" and opts.require(WRITE_ONLY)
        self.changelog_producer = "none" if (moved or postponed or leaves_level0) else producer
        if producer != "none":
            check_producer_options(opts, table.name)
        if self.changelog_producer == "lookup" and flush_lookup is None:
            from lakehouse_engine.write.changelog_producers import LookupChangelog

            # (The vectors of the snapshot the bucket writers' levels come from: see BucketLevels.levels.)
            self.flush_lookup = LookupChangelog(
                table, lambda: (self._flush_state() if self._dv_compacts else self._restore()).latest)
        #: An overwrite or rescale of a full-compaction table compacts its own files fully at
        #: commit, as Paimon's batch writer of one does (its changelog is dropped with the overwrite).
        self._replaces_to_top = self.primary_key and role.replaces and producer == "full-compaction"
        fixed = buckets if isinstance(buckets, FixedBuckets) else None
        assigner = buckets if isinstance(buckets, DynamicAssigner) else DynamicAssigner(0, 1)
        # The table's bucket mode; writing given fixed bucket counts is fixed whatever the table's.
        self.mode = BucketMode.HASH_FIXED if fixed is not None else table.bucket_mode()
        self.buckets = BucketRouter(table, self.mode, self._restore,
                                    fixed.default if fixed is not None else opts.bucket,
                                    fixed.counts if fixed is not None else None,
                                    assigner.num_assigners, assigner.assigner_id, fresh=role.replaces)
        self.partitions = PartitionCodec(self.schema)
        self.key_names = self.schema.trimmed_primary_keys if self.primary_key else []
        self.write_buffer_size = opts.require(WRITE_BUFFER_SIZE)
        self.target_file_size = opts.target_file_size(self.primary_key)
        self.merge_function = table.merge_function() if self.primary_key else None
        self.rowkind_field = opts.get(ROWKIND_FIELD)
        self.arrow_schema = self.schema.arrow_schema()
        self._writers: dict[tuple[bytes, int], BucketWriter] = {}
        self._buffered_bytes = 0
        self._restored: RestoredState | None = None
        self._current_state: RestoredState | None = None
        #: A DV writer's state at the cycle's first flush lookup (see `_flush_state`).
        self._flush_state_read: RestoredState | None = None
        self.write_only = opts.require(WRITE_ONLY) if role.compacts is None else not role.compacts
        self.stop_trigger = opts.stop_trigger
        # A DV table's level 0 is invisible to readers: every commit compacts it through the
        # lookup (write/deletion_vectors.py), and nothing else compacts inside the writer.
        self.deletion_vectors = self.primary_key and deletion_vectors_enabled(opts)
        self._dv_compacts = (self.deletion_vectors and not opts.require(WRITE_ONLY)
                             and not role.compaction_output)
        self._dv_state: tuple[RestoredState, dict[tuple[bytes, int], DeletionVectorBase]] = (RestoredState(), {})
        # The lookup at commit reads the older files' keys: read them while rows still come in.
        self._prefetch = (LookupPrefetch.for_deletion_vectors(table) if self._dv_compacts and not role.replaces
                          else None)
        self.full_compaction_delta_commits = opts.get(FULL_COMPACTION_DELTA_COMMITS)
        self._awaiting_restored = False
        self._full_cadence = FullCompactionCadence(table, commit_user)
        #: A stream writer's later cycles check each bucket's levels against the table first.
        self._cycles = CommitCycles(table, commit_user)
        self._closed = False
        self._lock = threading.Lock()
        self._write_cols: list[str] | None = None
        # A table whose commits look keys up keeps the runs it writes in the lookup cache: the
        # lookup of this commit and the next ones reads them without decoding (a first-row
        # table's compaction at commit looks its level-0 keys up).
        first_row_up = not self.write_only and opts.require(MERGE_ENGINE) == "first-row"
        run_cache = (CachedFileReader(table.file_reader(), cache_for(table.path_factory.table_path, opts))
                     if self.primary_key and (self._dv_compacts or self.changelog_producer == "lookup"
                                              or first_row_up)
                     else None)
        #: What every bucket writer of this TableWrite shares.
        self._context = WriteContext(
            table=table, commit_user=commit_user, role=role, restored=self._restore,
            merge_function=self.merge_function, changelog_producer=self.changelog_producer,
            flush_lookup=self.flush_lookup, key_names=self.key_names,
            target_file_size=self.target_file_size, write_only=self.write_only,
            stop_trigger=self.stop_trigger, full_compaction_delta_commits=self.full_compaction_delta_commits,
            deletion_vectors=self.deletion_vectors, dv_compacts=self._dv_compacts, run_cache=run_cache,
            # As Paimon's writers of tables that need lookups (its `needLookup`): first-row too,
            # whose compaction drops the level-0 rows of keys already above (the first-row lookup).
            # (The table's producer: an overwrite's writer makes no changelog, yet its level 0 goes up.)
            force_up_level0=(self.primary_key and not self.deletion_vectors
                             and (producer == "lookup" or opts.require(MERGE_ENGINE) == "first-row")),
            current=self._current, cycles=self._cycles,
            flush_state=self._flush_state if self._dv_compacts else None,
            # Its compaction at every commit takes level 0 up: the +I changelog comes from there.
            first_row_changelog=(self.changelog_producer == "lookup" and not self.write_only
                                 and not role.replaces and opts.require(MERGE_ENGINE) == "first-row"))
        # The `lookup` changelog's flush lookup reads the older files' keys, and the old rows of
        # the keys it finds: read them while rows still come in (write/lookup_prefetch.py).
        newest_wins = getattr(self.flush_lookup, "newest_wins", None)
        self._flush_prefetch = (
            LookupPrefetch.for_lookup_changelog(table, newest_wins)
            if (self.changelog_producer == "lookup" and newest_wins is not None and self.primary_key
                and not self.deletion_vectors and not self._context.first_row_changelog)
            else None)

    @classmethod
    def for_postpone_compaction(cls, table: FileStore, commit_user: str, bucket_counts: Mapping[bytes, int],
                                default_buckets: int) -> TableWrite:
        """The writer of postpone-bucket compaction: rows moved into fixed buckets (a partition's
        count, else `default_buckets`), its files the compaction's output."""
        return cls(table, commit_user, FixedBuckets(bucket_counts, default_buckets), COMPACTION_OUTPUT)

    @classmethod
    def for_rescale(cls, table: FileStore, commit_user: str, bucket_counts: Mapping[bytes, int],
                    bucket_num: int) -> TableWrite:
        """The writer of rescale: the partitions' rows rewritten into `bucket_counts` buckets."""
        return cls(table, commit_user, FixedBuckets(bucket_counts, bucket_num), REWRITE)

    @classmethod
    def for_spark_task(cls, table: FileStore, commit_user: str, assigner_id: int, num_assigners: int,
                       overwrite: bool) -> TableWrite:
        """The writer of one Spark write task: assigner `assigner_id` of `num_assigners` of a
        dynamic-bucket table (else the table's buckets), writing new or replacing data."""
        return cls(table, commit_user, assigner_of(assigner_id, num_assigners),
                   OVERWRITE_DATA if overwrite else NEW_DATA)

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

    # ---- writing -------------------------------------------------------------------
    def write_arrow(self, data: pa.Table | pa.RecordBatch) -> None:
        """Write a batch of rows (row kinds from `rowkind.field`, else all inserts)."""
        if self._closed:
            raise LakehouseError(f"this TableWrite of table {self.table.name} is closed")
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if data.num_rows == 0:
            return
        if self._write_cols is not None:
            data = self._fill_unwritten(data)
        table = conform_to_schema(data, self.arrow_schema, self.table.name)
        self._check_not_null(table)
        self.write_rows(table, self._row_kinds(table))

    def write_rows(self, table: pa.Table, kinds: np.ndarray) -> None:
        """Write rows already in the table's schema with their row kinds (int8 `_VALUE_KIND` codes).

        A batch larger than half of `write-buffer-size` is taken in slices of that size (at
        least 65,536 rows), in order: each is buffered (and flushed as sorted runs) before the
        next is copied, so the writer's own memory stays near the buffer size whatever the batch's.
        """
        if table.num_rows == 0:
            return
        half = self.write_buffer_size // 2
        step = max(_MIN_SLICE_ROWS, int(table.num_rows * half / max(table.nbytes, 1)))
        if table.num_rows <= step:
            self._write_slice(table, kinds)
            return
        for start in range(0, table.num_rows, step):
            self._write_slice(table.slice(start, step), kinds[start:start + step])

    def _write_slice(self, table: pa.Table, kinds: np.ndarray) -> None:
        table, kinds, routed = self.buckets.route(table, kinds)
        if table.num_rows == 0:
            return
        part_ids, partitions = self.partitions.group_rows(table)
        buckets, totals = self.buckets.assign(table, part_ids, partitions, routed)
        # Group id = partition * span + (bucket - lowest); buckets may be negative (postpone: -2).
        lowest = int(buckets.min())
        span = int(buckets.max()) - lowest + 1
        group = part_ids * span + (buckets - lowest)
        if len(partitions) == 1 and (buckets == buckets[0]).all():
            order = None
            bounds = [(0, table.num_rows, int(group[0]))]
        else:
            # NumPy's stable sort is a radix sort for 16-bit integers: a few times faster than
            # its merge sort of int64, and group ids are small.
            narrow = group.astype(np.int16) if int(group.max()) < 2 ** 15 else group
            order = np.argsort(narrow, kind="stable")
            sorted_groups = group[order]
            starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
            ends = np.r_[starts[1:], len(order)]
            bounds = [(int(s), int(e), int(sorted_groups[s])) for s, e in zip(starts, ends, strict=True)]
            table = take_rows(table, order, cores())
            kinds = kinds[order]
        for start, end, g in bounds:
            part = partitions[g // span]
            bucket = g % span + lowest
            self._buffer(part, bucket, int(totals[g // span]), table.slice(start, end - start),
                         kinds[start:end])
        if self._buffered_bytes > self.write_buffer_size:
            self._flush_until(self.write_buffer_size // 2)

    def _fill_unwritten(self, data: pa.Table) -> pa.Table:
        """`data` (the `with_write_type` columns) with the table's other columns as nulls."""
        assert self._write_cols is not None
        if sorted(data.column_names) != sorted(self._write_cols):
            raise SchemaError(f"table {self.table.name}: this write takes columns {self._write_cols} "
                              f"(with_write_type), got {data.column_names}")
        for f in self.arrow_schema:
            if f.name not in self._write_cols:
                data = data.append_column(f, pa.nulls(data.num_rows, f.type))
        return data

    def write_arrow_batch(self, batch: pa.RecordBatch) -> None:
        self.write_arrow(batch)

    def write_pandas(self, df: Any) -> None:
        """Write a pandas DataFrame with the table's columns."""
        self.write_arrow(arrow_from_pandas(df, self.arrow_schema, self.table.name))

    def _check_not_null(self, table: pa.Table) -> None:
        for f in self.schema.fields:
            if not f.type.nullable and table.column(f.name).null_count:
                what = "primary key field" if f.name in self.schema.primary_keys else "NOT NULL field"
                raise InvalidDataError(
                    f"{what} '{f.name}' of table {self.table.name} is null in "
                    f"{table.column(f.name).null_count} row(s)")

    def _row_kinds(self, table: pa.Table) -> np.ndarray:
        if not self.primary_key or self.rowkind_field is None:
            return np.zeros(table.num_rows, dtype=np.int8)
        col = table.column(self.rowkind_field)
        codes = pc.index_in(col, value_set=pa.array(list(ROW_KIND_CODES)))
        if codes.null_count:
            bad = pc.filter(col, pc.is_null(codes)).unique().to_pylist()[:5]
            raise InvalidDataError(
                f"field '{self.rowkind_field}' (option 'rowkind.field') of table {self.table.name} "
                f"holds unknown row kinds {bad}; expected +I, -U, +U or -D")
        lookup = np.array(list(ROW_KIND_CODES.values()), dtype=np.int8)
        return lookup[codes.to_numpy(zero_copy_only=False)]

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
        with flush_lookup_errors(self.table, writer):  # (its levels' files replaced and expired mid-cycle?)
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

    def with_write_type(self, write_cols: Sequence[str]) -> TableWrite:
        """Write only `write_cols` (pypaimon's call): batches then hold just these columns and the
        others are written as null (for a partial-update table: left as they are). Every primary
        key and partition column must be among them; SchemaError names what is wrong."""
        names = self.schema.field_names
        unknown = [c for c in write_cols if c not in names]
        if unknown:
            raise SchemaError(f"with_write_type: {unknown} are not columns of table {self.table.name}")
        needed = [k for k in list(self.schema.primary_keys) + list(self.schema.partition_keys)
                  if k not in write_cols]
        if needed:
            raise SchemaError(f"with_write_type: key and partition columns {needed} of table "
                              f"{self.table.name} must be written")
        self._write_cols = None if len(set(write_cols)) == len(names) else list(write_cols)
        return self

    def close(self) -> None:
        if self._prefetch is not None:
            self._prefetch.close()
        if self._flush_prefetch is not None:
            self._flush_prefetch.close()
        self._writers.clear()
        self._buffered_bytes = 0
        self._closed = True

    def __enter__(self) -> TableWrite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- preview (FileStoreTable.preview_buckets) ---------------------------------------
    def preview_buckets(self, data: pa.Table) -> pa.Int32Array:
        """The bucket each row of `data` would be written to, assigned as `write_arrow` assigns
        it, with nothing buffered or written. For a fresh TableWrite only: a dynamic-bucket
        assigner remembers the keys it placed."""

        if self.mode is BucketMode.CROSS_PARTITION:
            raise UnsupportedError(
                f"table {self.table.name}: bucket preview of a cross-partition upsert table (its "
                f"primary key does not contain the partition keys) is not supported")
        if data.num_rows == 0:
            return pa.array([], pa.int32())
        table = conform_to_schema(data, self.arrow_schema, self.table.name)
        part_ids, partitions = self.partitions.group_rows(table)
        buckets, _ = self.buckets.assign(table, part_ids, partitions)
        return pa.array(buckets.astype(np.int32), pa.int32())
