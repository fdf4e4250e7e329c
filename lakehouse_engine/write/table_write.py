"""TableWrite: a table's writer, as Paimon's TableWriteImpl over its KeyValueFileStoreWrite: made
from the table's options and the writer's role (what changelog it produces, whether it compacts,
which lookups it reads ahead), it conforms the batches it is given to the table's schema, takes
their row kinds, and routes the rows to (partition, bucket) (write/bucket_router.py).

Its base class FileStoreWrite (write/file_store_write.py) holds the bucket writers, bounds the
memory of their buffers and prepares the commit messages. Each bucket's own work (its buffer,
flush, levels, compaction and its part of the commit message) is its BucketWriter's
(write/bucket_writer.py), as Paimon's MergeTreeWriter is one bucket of its KeyValueFileStoreWrite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import InvalidDataError, LakehouseError, SchemaError, UnsupportedError
from lakehouse_engine.format.features import refused_options
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
from lakehouse_engine.partition import PartitionCodec
from lakehouse_engine.schema import BucketMode
from lakehouse_engine.threads import cores
from lakehouse_engine.write.batch_input import conform_to_schema
from lakehouse_engine.write.bucket_router import BucketRouter
from lakehouse_engine.write.deletion_vectors import deletion_vectors_enabled
from lakehouse_engine.write.file_store_write import FileStoreWrite
from lakehouse_engine.write.lookup_prefetch import LookupPrefetch
from lakehouse_engine.write.pandas_input import arrow_from_pandas
from lakehouse_engine.write.write_context import WriteContext
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
    from lakehouse_engine.store.file_store import FileStore

# Rows of the smallest slice an oversized batch is cut into: a small batch stays one sorted run
# whatever the buffer size (as a flush after each batch makes it).
_MIN_SLICE_ROWS = 1 << 16


class TableWrite(FileStoreWrite):
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
        super().__init__(table, commit_user)
        self.schema = table.schema
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
        self.write_only = opts.require(WRITE_ONLY) if role.compacts is None else not role.compacts
        self.stop_trigger = opts.stop_trigger
        # A DV table's level 0 is invisible to readers: every commit compacts it through the
        # lookup (write/deletion_vectors.py), and nothing else compacts inside the writer.
        self.deletion_vectors = self.primary_key and deletion_vectors_enabled(opts)
        self._dv_compacts = (self.deletion_vectors and not opts.require(WRITE_ONLY)
                             and not role.compaction_output)
        # The lookup at commit reads the older files' keys: read them while rows still come in.
        self._prefetch = (LookupPrefetch.for_deletion_vectors(table) if self._dv_compacts and not role.replaces
                          else None)
        self.full_compaction_delta_commits = opts.get(FULL_COMPACTION_DELTA_COMMITS)
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
