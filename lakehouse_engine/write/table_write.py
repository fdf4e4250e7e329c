"""TableWrite: route rows to (partition, bucket), buffer them with sequence numbers, flush sorted runs."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.bucket.cross_partition import CrossPartitionRouter
from lakehouse_engine.bucket.dynamic import DynamicBucketAssigner
from lakehouse_engine.compact.levels import Levels
from lakehouse_engine.errors import (
    DataFileMissingError,
    InvalidDataError,
    LakehouseError,
    SchemaError,
)
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.mergetree.merge import ROW_KIND_CODES, merge_records
from lakehouse_engine.options import (
    FULL_COMPACTION_DELTA_COMMITS,
    IGNORE_DELETE,
    MERGE_ENGINE,
    ROWKIND_FIELD,
    SEQUENCE_FIELD_SORT_ORDER,
    WRITE_BUFFER_SIZE,
    WRITE_ONLY,
)
from lakehouse_engine.partition import Partition, PartitionCodec
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.pandas_input import arrow_from_pandas

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable

log = logging.getLogger(__name__)
UNAWARE_BUCKET = 0


@dataclass
class _BucketBuffer:
    """Rows of one (partition, bucket) waiting to become a level-0 sorted run."""

    partition: Partition
    bucket: int
    total_buckets: int
    next_sequence: int
    tables: list[pa.Table] = field(default_factory=list)
    nbytes: int = 0
    new_files: list[DataFileMeta] = field(default_factory=list)
    levels: Levels | None = None
    compact_before: list[DataFileMeta] = field(default_factory=list)
    compact_after: list[DataFileMeta] = field(default_factory=list)


def conform_to_schema(data: pa.Table, expected: pa.Schema, table_name: str) -> pa.Table:
    """`data` with the table's columns, in order and with the table's types; SchemaError otherwise."""
    names = data.column_names
    missing = [n for n in expected.names if n not in names]
    extra = [n for n in names if n not in expected.names]
    if missing or extra:
        raise SchemaError(
            f"batch does not match the schema of table {table_name}: "
            f"missing columns {missing}, unexpected columns {extra}")
    columns = []
    for f in expected:
        col = data.column(f.name)
        if col.type != f.type:
            col = _cast_column(col, f, table_name)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=expected)


def _cast_column(col: pa.ChunkedArray, f: pa.Field, table_name: str) -> pa.ChunkedArray:
    src, dst = col.type, f.type
    if pa.types.is_dictionary(src):
        src = src.value_type
    ok = (
        src == dst
        or (pa.types.is_large_string(src) and pa.types.is_string(dst))
        or ((pa.types.is_large_binary(src) or pa.types.is_fixed_size_binary(src)) and pa.types.is_binary(dst))
        or (pa.types.is_integer(src) and pa.types.is_integer(dst))
        or (pa.types.is_decimal(src) and pa.types.is_decimal(dst))
        or (pa.types.is_timestamp(src) and pa.types.is_timestamp(dst) and src.tz == dst.tz)
        or (pa.types.is_floating(src) and pa.types.is_floating(dst))
        or (pa.types.is_null(src) and f.nullable)
        or _same_nested_kind(src, dst)  # element types are checked by the cast below
    )
    if not ok:
        raise SchemaError(f"column '{f.name}' of the batch has type {col.type}, but table "
                          f"{table_name} stores it as {dst}")
    try:
        return pc.cast(col, dst, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"column '{f.name}' cannot be stored as {dst} in table {table_name}: {e}") from None


def _same_nested_kind(src: pa.DataType, dst: pa.DataType) -> bool:
    """Both lists, both maps or both structs with the same field names, at every depth (ARRAY,
    MAP, ROW); leaf types are then checked by the cast. Arrow's struct cast would fill a missing
    field with nulls and drop an extra one, so field names must match exactly."""
    def is_list(t: pa.DataType) -> bool:
        return bool(pa.types.is_list(t) or pa.types.is_large_list(t))

    if is_list(src) and is_list(dst):
        return _same_shape(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return _same_shape(src.key_type, dst.key_type) and _same_shape(src.item_type, dst.item_type)
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        names = [src.field(i).name for i in range(src.num_fields)]
        if names != [dst.field(i).name for i in range(dst.num_fields)]:
            return False
        return all(_same_shape(src.field(i).type, dst.field(i).type) for i in range(src.num_fields))
    return False


def _same_shape(src: pa.DataType, dst: pa.DataType) -> bool:
    if pa.types.is_nested(src) or pa.types.is_nested(dst):
        return _same_nested_kind(src, dst)
    return True


class TableWrite:
    """Writes batches into a table's buckets; `prepare_commit` returns the CommitMessages to commit."""

    def __init__(self, table: FileStoreTable, commit_user: str, num_assigners: int = 1,
                 assigner_id: int = 0, overwrite: bool = False,
                 fixed_buckets: Mapping[bytes, int] | None = None, default_buckets: int | None = None):
        """A writer for `table`.

        Args:
            num_assigners, assigner_id: for dynamic-bucket tables written by several processes at
                once, this writer is assigner `assigner_id` of `num_assigners` and only receives
                keys with `abs(hash % num_assigners) == assigner_id`.
            overwrite: the write replaces partitions, so dynamic bucket indexes start empty.
            fixed_buckets, default_buckets: write with fixed buckets, `fixed_buckets[partition]`
                (else `default_buckets`) per partition, whatever the table's mode (postpone-bucket
                compaction and rescale use this).
        """
        self.table = table
        self.schema = table.schema
        self.commit_user = commit_user
        opts = self.schema.core_options
        self.options = opts
        self.primary_key = self.schema.has_primary_key
        self.num_buckets = opts.bucket
        self.fixed_buckets = dict(fixed_buckets) if fixed_buckets is not None else None
        self.default_buckets = default_buckets
        if self.fixed_buckets is not None:
            self.mode = "fixed"
            self.num_buckets = default_buckets or 1
        elif self.num_buckets > 0:
            self.mode = "fixed"
        elif self.num_buckets == -2:
            self.mode = "postpone"
        elif not self.primary_key:
            self.mode = "unaware"
        elif self.schema.cross_partition_update:
            self.mode = "cross"
        else:
            self.mode = "dynamic"
        self.assigner: DynamicBucketAssigner | None = None
        self.router: CrossPartitionRouter | None = None
        self._assigner_args = (num_assigners, assigner_id, overwrite)
        self.overwrite = overwrite
        self.partitions = PartitionCodec(self.schema)
        self.key_names = self.schema.trimmed_primary_keys if self.primary_key else []
        self.bucket_keys = self.schema.bucket_keys
        self.bucket_key_types = self.schema.types_of(self.bucket_keys)
        self.write_buffer_size = opts.require(WRITE_BUFFER_SIZE)
        self.target_file_size = opts.target_file_size(self.primary_key)
        self.merge_engine = opts.require(MERGE_ENGINE)
        self.ignore_delete = bool(opts.get(IGNORE_DELETE))
        self.sequence_fields = opts.sequence_fields
        self.sequence_descending = opts.require(SEQUENCE_FIELD_SORT_ORDER) == "descending"
        self.rowkind_field = opts.get(ROWKIND_FIELD)
        self.arrow_schema = self.schema.arrow_schema()
        self._buffers: dict[tuple[bytes, int], _BucketBuffer] = {}
        self._buffered_bytes = 0
        self._restored: tuple[dict[tuple[bytes, int], int], dict[bytes, int]] | None = None
        self._bucket_files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        self._latest_snapshot_id: int | None = None
        self.write_only = bool(opts.get(WRITE_ONLY))
        self.stop_trigger = opts.stop_trigger
        self.full_compaction_delta_commits = opts.get(FULL_COMPACTION_DELTA_COMMITS)
        self._closed = False
        self._lock = threading.Lock()

    # ---- restoring what the table already holds -------------------------------------
    def _restore(self) -> tuple[dict[tuple[bytes, int], int], dict[bytes, int]]:
        """Max sequence number per bucket and bucket count per partition, from the latest snapshot."""
        if self._restored is None:
            max_seq: dict[tuple[bytes, int], int] = {}
            totals: dict[bytes, int] = {}
            latest = self.table.snapshot_manager().latest_snapshot()
            self._latest_snapshot_id = latest.id if latest else None
            for e in self.table.manifest_io().live_entries(latest):
                key = (e.partition, e.bucket)
                max_seq[key] = max(max_seq.get(key, -1), e.file.max_sequence_number)
                self._bucket_files.setdefault(key, []).append(e.file)
                if e.total_buckets > 0:
                    totals[e.partition] = e.total_buckets
            self._restored = (max_seq, totals)
        return self._restored

    # ---- writing -------------------------------------------------------------------
    def write_arrow(self, data: pa.Table | pa.RecordBatch) -> None:
        """Write a batch of rows (row kinds from `rowkind.field`, else all inserts)."""
        if self._closed:
            raise LakehouseError(f"this TableWrite of table {self.table.name} is closed")
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if data.num_rows == 0:
            return
        table = conform_to_schema(data, self.arrow_schema, self.table.name)
        self._check_not_null(table)
        self.write_rows(table, self._row_kinds(table))

    def write_rows(self, table: pa.Table, kinds: np.ndarray) -> None:
        """Write rows already in the table's schema with their row kinds (int8 `_VALUE_KIND` codes)."""
        if table.num_rows == 0:
            return
        self._routed_buckets: np.ndarray | None = None
        if self.mode == "cross":
            if self.router is None:
                self._restore()
                latest = (self.table.snapshot_manager().snapshot(self._latest_snapshot_id)
                          if self._latest_snapshot_id else None)
                self.router = CrossPartitionRouter(self.table, latest)
            table, kinds, self._routed_buckets = self.router.route(table, kinds)
            if table.num_rows == 0:
                return
        part_ids, partitions = self.partitions.group_rows(table)
        buckets, totals = self._assign_buckets(table, part_ids, partitions)
        # Group id = partition * span + (bucket - lowest); buckets may be negative (postpone: -2).
        lowest = int(buckets.min())
        span = int(buckets.max()) - lowest + 1
        group = part_ids * span + (buckets - lowest)
        if len(partitions) == 1 and (buckets == buckets[0]).all():
            order = None
            bounds = [(0, table.num_rows, int(group[0]))]
        else:
            order = np.argsort(group, kind="stable")
            sorted_groups = group[order]
            starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
            ends = np.r_[starts[1:], len(order)]
            bounds = [(int(s), int(e), int(sorted_groups[s])) for s, e in zip(starts, ends, strict=True)]
            idx = pa.array(order)
            table = table.take(idx)
            kinds = kinds[order]
        for start, end, g in bounds:
            part = partitions[g // span]
            bucket = g % span + lowest
            self._buffer(part, bucket, int(totals[g // span]), table.slice(start, end - start),
                         kinds[start:end])
        if self._buffered_bytes > self.write_buffer_size:
            self._flush_until(self.write_buffer_size // 2)

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

    def dynamic_assigner(self) -> DynamicBucketAssigner:
        """This writer's dynamic bucket assigner (restored from the latest snapshot on first use)."""
        if self.assigner is None:
            self._restore()
            latest = self.table.snapshot_manager().snapshot(self._latest_snapshot_id) if self._latest_snapshot_id else None
            n, i, fresh = self._assigner_args
            self.assigner = DynamicBucketAssigner(self.table, latest, n, i, fresh)
        return self.assigner

    def _assign_buckets(self, table: pa.Table, part_ids: np.ndarray,
                        partitions: list[Partition]) -> tuple[np.ndarray, np.ndarray]:
        """Bucket per row and bucket count per partition (a rescaled partition keeps its own count)."""
        n = table.num_rows
        if self.mode == "unaware":
            return np.full(n, UNAWARE_BUCKET, dtype=np.int64), np.full(len(partitions), -1)
        if self.mode == "cross":
            assert self._routed_buckets is not None
            return self._routed_buckets, np.full(len(partitions), -1)
        if self.mode == "postpone":
            return np.full(n, POSTPONE_BUCKET, dtype=np.int64), np.full(len(partitions), POSTPONE_BUCKET)
        if self.mode == "dynamic":
            assigner = self.dynamic_assigner()
            hashes = hash_rows([table.column(k) for k in self.key_names], self.schema.types_of(self.key_names))
            buckets = np.empty(n, dtype=np.int64)
            if len(partitions) == 1:
                buckets[:] = assigner.assign(partitions[0], hashes)
            else:
                order = np.argsort(part_ids, kind="stable")  # keeps arrival order per partition
                bounds = np.searchsorted(part_ids[order], np.arange(len(partitions) + 1))
                for pid, part in enumerate(partitions):
                    rows = order[bounds[pid]:bounds[pid + 1]]
                    buckets[rows] = assigner.assign(part, hashes[rows])
            return buckets, np.full(len(partitions), -1)
        if self.fixed_buckets is not None:
            known = self.fixed_buckets
        else:
            _, known = self._restore()
        totals = np.array([known.get(p.binary, self.num_buckets) for p in partitions], dtype=np.int64)
        hashes = hash_rows([table.column(k) for k in self.bucket_keys], self.bucket_key_types)
        counts = int(totals[0]) if (totals == totals[0]).all() else totals[part_ids]
        return bucket_of(hashes, counts).astype(np.int64), totals

    def _buffer(self, part: Partition, bucket: int, total_buckets: int, rows: pa.Table,
                kinds: np.ndarray) -> None:
        key = (part.binary, bucket)
        buf = self._buffers.get(key)
        if buf is None:
            max_seq, _ = self._restore()
            buf = _BucketBuffer(part, bucket, total_buckets, max_seq.get(key, -1) + 1)
            self._buffers[key] = buf
        n = rows.num_rows
        seq = np.arange(buf.next_sequence, buf.next_sequence + n, dtype=np.int64)
        buf.next_sequence += n
        rows = rows.append_column(SEQUENCE_NUMBER, pa.array(seq)).append_column(
            VALUE_KIND, pa.array(kinds, type=pa.int8()))
        buf.tables.append(rows)
        buf.nbytes += rows.nbytes
        self._buffered_bytes += rows.nbytes

    # ---- flushing --------------------------------------------------------------------
    def _flush_until(self, limit: int) -> None:
        """Flush the largest buffers until the buffered bytes fall to `limit` (bounded memory)."""
        chosen, left = [], self._buffered_bytes
        for buf in sorted(self._buffers.values(), key=lambda b: b.nbytes, reverse=True):
            if left <= limit:
                break
            chosen.append(buf)
            left -= buf.nbytes
        self._flush_all(chosen)

    def _flush_all(self, buffers: list[_BucketBuffer]) -> None:
        """Flush buffers, several at once: sorting and Parquet encoding release the GIL."""
        pending = [b for b in buffers if b.tables]
        if len(pending) > 1:
            with ThreadPoolExecutor(max_workers=min(len(pending), os.cpu_count() or 1)) as pool:
                list(pool.map(self._flush, pending))
        elif pending:
            self._flush(pending[0])

    def _flush(self, buf: _BucketBuffer) -> None:
        if not buf.tables:
            return
        with self._lock:
            rows = pa.concat_tables(buf.tables) if len(buf.tables) > 1 else buf.tables[0]
            self._buffered_bytes -= buf.nbytes
            buf.tables, buf.nbytes = [], 0
        if self.primary_key:
            # Buffered rows stand in sequence order (numbers were handed out as they arrived).
            rows = merge_records(rows, self.key_names, self.merge_engine, self.sequence_fields,
                                 self.sequence_descending, self.ignore_delete,
                                 rows_in_sequence_order=True, options=self.options,
                                 primary_keys=self.schema.primary_keys, raw_input=True)
        writer = DataFileWriter(self.table.file_io, self.schema,
                                self.table.path_factory.bucket_dir(buf.partition.spec, buf.bucket),
                                self.table.path_factory.new_data_file_name, self.target_file_size)
        first_seq = None if self.primary_key else int(rows.column(SEQUENCE_NUMBER)[0].as_py())
        written = writer.write_run(rows, level=0, min_sequence=first_seq)
        buf.new_files.extend(written)
        if self.primary_key and not self.write_only and buf.bucket >= 0:
            levels = self._levels(buf)
            levels.add_files(written)
            if levels.number_of_sorted_runs() >= self.stop_trigger:
                # Paimon's stop trigger: compact before taking more input into this bucket.
                self._compact(buf, full=False)

    # ---- compaction inside the writer ---------------------------------------------------
    def _levels(self, buf: _BucketBuffer) -> Levels:
        if buf.levels is None:
            self._restore()
            buf.levels = Levels(self._bucket_files.get((buf.partition.binary, buf.bucket), []),
                                self.options.num_levels)
        return buf.levels

    def _compact(self, buf: _BucketBuffer, full: bool) -> None:
        """Compact one bucket now; results merge into the session's compact before/after."""
        from lakehouse_engine.compact.rewriter import BucketCompactor
        from lakehouse_engine.compact.table_compact import pick_unit

        levels = self._levels(buf)
        unit = pick_unit(levels, self.options, full)
        if unit is None:
            return
        try:
            before, after = BucketCompactor(self.table, buf.partition, buf.bucket).compact(levels, unit)
        except DataFileMissingError as e:
            # The bucket's files changed under this writer (a dedicated compaction replaced them and
            # expiry removed them). Compaction here is an optimisation: write the data without it.
            # A file that is there but will not decode still fails the write.
            log.warning("table %s, bucket %s: skipping the writer's compaction: %s", self.table.name,
                        buf.bucket, e)
            return
        after_names = {f.file_name for f in buf.compact_after}
        before_names = {f.file_name for f in buf.compact_before}
        bucket_dir = self.table.path_factory.bucket_dir(buf.partition.spec, buf.bucket)
        for f in before:
            if f.file_name in after_names:
                # An intermediate file of this session, never committed: drop it for good
                # (unless it is an upgraded committed file sharing its physical file).
                buf.compact_after = [a for a in buf.compact_after if a.file_name != f.file_name]
                if f.file_name not in before_names:
                    self.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
            else:
                buf.compact_before.append(f)
        buf.compact_after.extend(after)

    def _compact_at_commit(self, buf: _BucketBuffer) -> None:
        full = False
        if self.full_compaction_delta_commits:
            next_id = (self._latest_snapshot_id or 0) + 1
            full = next_id % self.full_compaction_delta_commits == 0
        self._compact(buf, full)

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush everything buffered and return one CommitMessage per bucket with new files."""
        messages = []
        self._flush_all(list(self._buffers.values()))
        if self.primary_key and not self.write_only and not self.overwrite:
            # (An overwrite replaces the partition anyway: compacting what it deletes is waste.)
            touched = [b for b in self._buffers.values() if b.new_files and b.bucket >= 0]
            if len(touched) > 1:
                with ThreadPoolExecutor(max_workers=min(len(touched), os.cpu_count() or 1)) as pool:
                    list(pool.map(self._compact_at_commit, touched))
            elif touched:
                self._compact_at_commit(touched[0])
        index_bases: dict[bytes, list[str]] = {}
        if self.assigner is not None:
            # What each partition's index was before this commit: the committer checks it is unchanged.
            index_bases = {p: self.assigner.base_index_files(p) for p, _ in self._buffers}
        index_changes = self.assigner.prepare_index_files() if self.assigner is not None else {}
        for key, buf in self._buffers.items():
            change = index_changes.get(key)
            if buf.new_files or buf.compact_before or buf.compact_after or change:
                message = CommitMessage(buf.partition.binary, buf.bucket, buf.total_buckets,
                                        list(buf.new_files), list(buf.compact_before),
                                        list(buf.compact_after), commit_user=self.commit_user)
                if self.assigner is not None:
                    message.index_base = None if self.assigner.fresh else index_bases[key[0]]
                    message.inserted_keys = self.assigner.inserted.pop(key, 0)
                    message.updated_keys = self.assigner.updated.pop(key, 0)
                    if change is not None:
                        message.new_index_files = [change.entry]
                        message.deleted_index_files = [change.replaced] if change.replaced else []
                messages.append(message)
                buf.new_files, buf.compact_before, buf.compact_after = [], [], []
        return messages

    def abort(self, messages: Iterable[CommitMessage]) -> None:
        """Delete the files of messages that will never be committed."""
        from lakehouse_engine.commit import delete_message_files

        delete_message_files(self.table, list(messages))

    def close(self) -> None:
        self._buffers.clear()
        self._buffered_bytes = 0
        self._closed = True

    def __enter__(self) -> TableWrite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
