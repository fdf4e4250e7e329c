"""BucketWriter: one (partition, bucket) of a TableWrite, as Paimon's MergeTreeWriter is one bucket
of its KeyValueFileStoreWrite: the bucket's buffered rows, their flush into level-0 sorted runs
(merged, with their changelog, looked up and cached as the table asks), and the bucket's part of the
commit message. Its base classes hold the bucket's levels (write/bucket_levels.py) and the
compaction inside the writer (write/bucket_compaction.py); what the bucket writers of one TableWrite
share is their WriteContext (write/write_context.py).

TableWrite routes rows to their bucket writers, counts the memory of all their buffers (it
chooses which buckets flush), flushes and compacts several buckets at once, and adds what the
table's bucket index contributes to each message.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry
from lakehouse_engine.mergetree.changelog import input_changelog
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.options import MERGE_ENGINE
from lakehouse_engine.partition import Partition
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.read.split import PartitionRow
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.write.bucket_compaction import BucketCompaction
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.flush_files import input_changelog_files, looked_up, write_and_look_up
from lakehouse_engine.write.write_context import WriteContext

__all__ = ["BucketWriter"]


def _per_file(written: list[DataFileMeta], run: pa.Table) -> Iterator[tuple[DataFileMeta, pa.Table]]:
    """Each file of a written run with its slice of `run`'s rows (a run's files hold them in order)."""
    offset = 0
    for f in written:
        yield f, run.slice(offset, f.row_count)
        offset += f.row_count


class BucketWriter(BucketCompaction):
    """Rows of one (partition, bucket) waiting to become a level-0 sorted run, and the files the
    bucket's flushes and compactions wrote since the last commit message."""

    def __init__(self, context: WriteContext, partition: Partition, bucket: int, total_buckets: int,
                 next_sequence: int):
        """A writer of `bucket` of `partition` (of `total_buckets`), numbering its rows from `next_sequence`."""
        super().__init__()
        self.context = context
        self.partition = partition
        self.bucket = bucket
        self.total_buckets = total_buckets
        self.next_sequence = next_sequence
        self._buffer: list[pa.Table] = []
        #: What the buffered rows take in memory (TableWrite flushes the largest buffers first).
        self.buffered_bytes = 0
        self.new_files: list[DataFileMeta] = []
        self.compact_before: list[DataFileMeta] = []
        self.compact_after: list[DataFileMeta] = []
        #: Index files the flush lookup made for this bucket since the last commit message.
        self.lookup_index_files: list[IndexManifestEntry] = []
        #: Changelog files of the new data (input producer) and of compaction (lookup, full-compaction).
        self.new_changelog: list[DataFileMeta] = []
        self.compact_changelog: list[DataFileMeta] = []
        #: The files of the bucket the first flush lookup since the last message compared rows with.
        self.lookup_base: list[str] | None = None
        self.lookup_snapshot: int | None = None
        #: Every file this writer handed out in a message (a stream writer's earlier commits): its
        #: levels hold what they left, so one its compactions removed again is no other writer's.
        self._handed_out: set[str] = set()
        #: A DV table's compaction at commit: new vector index files, and what they were computed against.
        self.deletion_vector_files: list[IndexManifestEntry] = []
        self.deletion_vector_base: tuple[list[str], list[str]] | None = None
        #: A first-row table's compactions since the last message: the bucket's files they saw.
        self.compact_base: set[str] | None = None
        #: A DV table's new level-0 files' keys, kept from the flush so its lookup need not read them.
        self.new_keys: dict[str, pa.Table] = {}
        #: Level-0 files this writer flushed whose `lookup` changelog their flush gave: the
        #: compaction taking them up gives that of the bucket's other level-0 files only.
        self.changelog_given: set[str] = set()
        #: The flush changelog of each of those runs (its files' names, its changelog files).
        self._run_changelog: list[tuple[frozenset[str], list[DataFileMeta]]] = []
        #: Written since this writer's last full compaction of it landed: the next commit that
        #: compacts fully takes it too, written in that commit or not (Paimon's
        #: GlobalFullCompactionSinkWrite; `write.full_compaction_cadence` clears it).
        self.awaits_full_compaction = False
        #: The identifier of the last commit that wrote the bucket, while it awaits a full compaction.
        self.written_at: int | None = None
        #: The identifier of the last commit whose compaction left the bucket fully compacted (its
        #: COMPACT snapshot landing clears the debt; one that skipped the bucket does not).
        self.full_compacted_at: int | None = None
        #: A first-row lookup-changelog writer: the first sequence number of the flushed rows whose
        #: changelog no compaction of this writer wrote yet (None: none waits).
        self.first_row_unlogged: int | None = None

    # ---- the write buffer ------------------------------------------------------------------
    def write(self, rows: pa.Table, kinds: np.ndarray) -> int:
        """Buffer `rows` with their row kinds (int8 `_VALUE_KIND` codes), numbered in arrival order;
        the bytes they now take in the buffer."""
        n = rows.num_rows
        seq = np.arange(self.next_sequence, self.next_sequence + n, dtype=np.int64)
        self.next_sequence += n
        rows = rows.append_column(SEQUENCE_NUMBER, pa.array(seq)).append_column(
            VALUE_KIND, pa.array(kinds, type=pa.int8()))
        self._buffer.append(rows)
        self.buffered_bytes += rows.nbytes
        return rows.nbytes

    @property
    def has_buffered_rows(self) -> bool:
        """Whether rows wait in the buffer."""
        return bool(self._buffer)

    def take_buffer(self) -> tuple[pa.Table, int]:
        """The buffered rows as one table (in sequence order) and the bytes they took; the buffer is
        then empty. Only with rows buffered."""
        rows = pa.concat_tables(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        nbytes = self.buffered_bytes
        self._buffer, self.buffered_bytes = [], 0
        return rows, nbytes

    # ---- the flush ---------------------------------------------------------------------------
    def flush(self, rows: pa.Table) -> None:
        """Write `rows` (taken from the buffer) as a level-0 sorted run: merged, with its input
        changelog, looked up in the bucket's older files and kept in the lookup cache as the table
        asks; then compact the bucket if its sorted runs reached the stop trigger."""
        ctx = self.context
        table, schema = ctx.table, ctx.schema
        bucket_dir = table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        looks_up = ctx.flush_lookup is not None and ctx.primary_key and self.bucket >= 0
        if looks_up or (ctx.primary_key and not ctx.write_only and not ctx.deletion_vectors and self.bucket >= 0):
            rows = self._above_levels(rows)
        given = rows
        if ctx.merge_function is not None:
            # Buffered rows stand in sequence order (numbers were handed out as they arrived).
            rows = ctx.merge_function.merge(rows, rows_in_sequence_order=True, raw_input=True)
        changelog = None
        if ctx.changelog_producer == "input":
            # The records as given, kinds and all, before they merge (Paimon's input changelog).
            # A deduplicate merge that kept every record changed none: they are its run already.
            kept_all = ctx.options.require(MERGE_ENGINE) == "deduplicate" and rows.num_rows == given.num_rows
            changelog = rows if kept_all else input_changelog(given, ctx.key_names)
        paths = table.path_factory
        namer = (paths.postpone_data_file_namer(ctx.commit_user) if self.bucket == POSTPONE_BUCKET
                 else paths.data_file_namer(bucket_dir))
        writer = DataFileWriter(table.file_io, schema, bucket_dir, namer, ctx.target_file_size)
        first_seq = None if ctx.primary_key else int(rows.column(SEQUENCE_NUMBER)[0].as_py())
        if looks_up and ctx.first_row_changelog and self.first_row_unlogged is None:
            # The compaction taking level 0 up writes this run's changelog (it looks the keys up
            # anyway). The buffer stands in sequence order: its first row has the lowest number.
            self.first_row_unlogged = int(given.column(SEQUENCE_NUMBER)[0].as_py())
        older: list[DataFileMeta] = []
        if looks_up:
            older = self.levels().all_files()
            # (A write-only writer keeps its earlier runs out of the levels: they are older too.)
            names = {f.file_name for f in older}
            if self.lookup_base is None:
                self.lookup_base = sorted(names | self._handed_out)
                self.lookup_snapshot = self.levels_snapshot
                # (A DV writer's levels come from the table as this cycle's first flush read it: as of now.)
                if self._handed_out and ctx.current is not None and ctx.flush_state is None:
                    # A stream writer's later commit: where the bucket is now what its levels
                    # hold, the lookup saw the table as of now, and the staleness check need not
                    # read (possibly expired) snapshots back to where the writer started.
                    now = ctx.current()
                    live = {f.file_name for f in now.bucket_files.get((self.partition.binary, self.bucket), [])}
                    if now.latest is not None and live == names:
                        self.lookup_snapshot = now.latest.id
            if self.runs_outside_levels:
                # (A compaction of the levels replaced their own runs: never read those again.)
                older += [f for f in self.new_files if f.file_name not in names]
        run = self._run_columns(rows) if (looks_up or ctx.run_cache is not None) and self.bucket >= 0 else None
        defers = looks_up and ctx.changelog_producer == "lookup" and self.level0_pending()
        if looks_up and (ctx.first_row_changelog or defers):
            # The compaction taking level 0 up gives this run's changelog, one change per key with
            # the level-0 files before it (Paimon's lookup-wait compaction); a flush changelog
            # would give a key in both twice. (The base is still recorded: the commit checks no
            # other writer's keys landed since.)
            written, found = writer.write_run(rows, level=0, min_sequence=first_seq), None
        elif looks_up and run is not None and ctx.flush_lookup is not None and ctx.flush_lookup.takes_run:
            written, found, run = write_and_look_up(table, ctx.flush_lookup, writer, rows, self.partition,
                                                    self.bucket, older, run)
        else:
            written = writer.write_run(rows, level=0, min_sequence=first_seq)
            found = None
            if looks_up:
                flush_lookup = ctx.flush_lookup
                assert flush_lookup is not None
                found = looked_up(table, written, lambda: flush_lookup.lookup(
                    self.partition, self.bucket, written, older), bucket_dir)
        if changelog is not None:
            self.new_changelog.extend(input_changelog_files(table, ctx.target_file_size, changelog, rows,
                                                            written, bucket_dir))
        if ctx.run_cache is not None and run is not None:
            for f, rows_of_file in _per_file(written, run):
                ctx.run_cache.put_written(f"{bucket_dir}/{f.file_name}", rows_of_file)
        if found is not None:
            self.lookup_index_files.extend(found.index_files)
            self.compact_changelog.extend(found.changelog_files)
            self.changelog_given.update(f.file_name for f in written)
            self._run_changelog.append((frozenset(f.file_name for f in written), list(found.changelog_files)))
        self.new_files.extend(written)
        if ctx.dv_compacts:
            for f, keys_of_file in _per_file(written, rows.select(ctx.key_names)):
                self.new_keys[f.file_name] = keys_of_file
        if not self.runs_outside_levels:
            levels = self.levels()
            levels.add_files(written)
            if levels.number_of_sorted_runs() >= ctx.stop_trigger:
                # Paimon's stop trigger: compact before taking more input into this bucket.
                self.compact(full=False)

    def level0_pending(self) -> bool:
        """Whether the bucket's level 0 holds a file whose changelog is not given yet (a write-only
        writer's, a flush that left it to the compaction): the next flush leaves its changelog to
        the compaction that takes level 0 up too. Without one, the flush gives it (the common case)."""
        return any(f.level == 0 and f.file_name not in self.changelog_given for f in self.lookup_files())

    @property
    def runs_outside_levels(self) -> bool:
        """Whether the runs this writer flushes stay out of its levels (a write-only writer's, a DV
        table's until its compaction at commit): else the levels hold them, or what compacted them."""
        ctx = self.context
        return not (ctx.primary_key and not ctx.write_only and not ctx.deletion_vectors and self.bucket >= 0)

    def lookup_files(self) -> list[DataFileMeta]:
        """The bucket's files a flush lookup now would look in: its levels and the runs this writer
        flushed outside them (a write-only writer's)."""
        older = self.levels().all_files()
        if not self.runs_outside_levels:
            return older
        names = {f.file_name for f in older}
        return older + [f for f in self.new_files if f.file_name not in names]

    def _run_columns(self, rows: pa.Table) -> pa.Table | None:
        """The run's rows in file layout (the fields, `_SEQUENCE_NUMBER`, `_VALUE_KIND` with the
        data files' types): what the lookup cache holds and the flush lookup reads; None when
        they do not convert (the lookup then reads the files)."""
        schema = self.context.schema
        file_schema = schema.data_file_arrow_schema()
        names = schema.field_names + [SEQUENCE_NUMBER, VALUE_KIND]
        if any(n not in rows.column_names for n in names):
            return None
        try:
            return rows.select(names).cast(pa.schema([file_schema.field(n) for n in names]))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None

    # ---- the bucket's part of the commit -------------------------------------------------------
    @property
    def has_increment(self) -> bool:
        """Whether the bucket wrote files since the last commit message."""
        return bool(self.new_files or self.compact_before or self.compact_after or self.lookup_index_files
                    or self.new_changelog or self.compact_changelog)

    def drain_increment(self) -> CommitMessage:
        """The bucket's commit message (its new and compacted files, changelog, the lookup's and the
        deletion vectors' index files), which the writer then forgets: Paimon's drainIncrement.
        TableWrite adds what the table's bucket index contributes."""
        ctx = self.context
        new_files, after = list(self.new_files), list(self.compact_after)
        if ctx.role.compaction_output:
            new_files, after = [], new_files + after
            # Its changelog lands with the compaction (Paimon's compact increment).
            self.compact_changelog, self.new_changelog = self.new_changelog + self.compact_changelog, []
        # The partition also reads as its values (`tuple(message.partition)`), as pypaimon's.
        partition = PartitionRow(self.partition.binary, self.partition.values,
                                 [ctx.schema.field(k) for k in ctx.schema.partition_keys])
        bucket_dir = ctx.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        new_files = [f.located(bucket_dir) for f in new_files]
        message = CommitMessage(partition, self.bucket, self.total_buckets,
                                new_files, list(self.compact_before), after,
                                commit_user=ctx.commit_user)
        message.new_index_files = self.lookup_index_files
        message.new_changelog, message.compact_changelog = self.new_changelog, self.compact_changelog
        message.deletion_vector_files = self.deletion_vector_files
        message.deletion_vector_base = self.deletion_vector_base
        message.lookup_base, message.lookup_snapshot = self.lookup_base, self.lookup_snapshot
        self._handed_out.update(f.file_name for f in new_files + after)
        message.compact_base = sorted(self.compact_base) if self.compact_base is not None else None
        self.compact_base = None
        self.new_files, self.compact_before, self.compact_after = [], [], []
        self.new_changelog, self.compact_changelog = [], []
        self.lookup_index_files, self.deletion_vector_files = [], []
        self.deletion_vector_base, self.lookup_base, self.lookup_snapshot = None, None, None
        self.changelog_given, self._run_changelog = set(), []
        self.new_keys = {}
        return message

    def uncommitted(self) -> CommitMessage | None:
        """The data, changelog and index files the bucket wrote and has not handed out in a message
        (to delete when the write is aborted); None when there are none. The compaction's inputs go
        with them: a committed file the compaction only moved up a level is the same physical file
        as its original, and must stay."""
        if not (self.new_files or self.compact_after or self.new_changelog or self.compact_changelog
                or self.lookup_index_files):
            return None
        return CommitMessage(self.partition.binary, self.bucket, self.total_buckets,
                             list(self.new_files), list(self.compact_before), list(self.compact_after),
                             new_index_files=list(self.lookup_index_files),
                             new_changelog=list(self.new_changelog),
                             compact_changelog=list(self.compact_changelog),
                             commit_user=self.context.commit_user)
