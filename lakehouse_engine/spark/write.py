"""Distributed writes: route a DataFrame's rows to the tasks that may write them, run the engine's
TableWrite in each task, and commit the tasks' CommitMessages once on the driver.

Routing depends on the table's bucket mode: fixed buckets shuffle by (partition, bucket) with
the engine's hash; dynamic buckets shuffle by key hash so that each task is one of n bucket
assigners; postpone buckets and bucket-unaware append tables are written where the rows are.

Exactly-once: tasks only write data and index files (names are unique per attempt) and return
their CommitMessages as rows; the driver commits the messages of the rows `collect()` returned.
Spark returns one result per partition, from the attempt it kept, so files written by failed or
losing speculative attempts are never committed: they are orphans for `remove_orphan_files`.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

from lakehouse_engine.bucket.dynamic import HASH_INDEX, assigner_of
from lakehouse_engine.bucket.hash_index import decode_hashes
from lakehouse_engine.catalog import Catalog, Identifier
from lakehouse_engine.commit import TableCommit
from lakehouse_engine.errors import (
    CommitTimeoutError,
    InvalidDataError,
    LakehouseError,
    SchemaError,
    UnsupportedError,
)
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.format.manifest import FileKind
from lakehouse_engine.options import (
    DYNAMIC_BUCKET_ASSIGNER_PARALLELISM,
    DYNAMIC_BUCKET_INITIAL_BUCKETS,
    WRITE_ONLY,
)
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.table_write import TableWrite, conform_to_schema

# The column that carries each row's bucket through the shuffle (dropped before writing).
BUCKET_COLUMN = "__lakehouse_bucket"
# Dynamic bucket mode: the row's assigner, and the value Spark's hash partitioning sends to the
# task of that assigner (both dropped before writing).
ASSIGNER_COLUMN = "__lakehouse_assigner"
ROUTE_COLUMN = "__lakehouse_route"
_ROUTING_COLUMNS = (BUCKET_COLUMN, ASSIGNER_COLUMN, ROUTE_COLUMN)
MESSAGE_COLUMN = "message"
MESSAGE_SCHEMA = StructType([StructField(MESSAGE_COLUMN, BinaryType(), False)])
_MESSAGE_ARROW_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary(), nullable=False)])
# A task hands TableWrite at least this many rows at a time (Spark's Arrow batches are small).
_WRITE_CHUNK_ROWS = 262_144
# The seed of Spark's `HashPartitioning` (Murmur3Hash's default).
_SPARK_HASH_SEED = 42

TaskHook = Callable[[list[CommitMessage]], None]


@dataclass(frozen=True)
class TableRef:
    """Where an executor re-opens a table: the warehouse (a path or URI) and `database.table`."""

    warehouse: str
    identifier: str

    def open(self) -> FileStoreTable:
        return Catalog(self.warehouse).get_table(self.identifier)

    @staticmethod
    def of(table_or_identifier: FileStoreTable | str | Identifier,
           warehouse: str | None = None) -> TableRef:
        """The reference of a table object or name; a table on a local disk knows its warehouse.

        Raises:
            LakehouseError: the table is named without a warehouse, or lives on a remote
                filesystem and no warehouse URI was given.
        """
        if isinstance(table_or_identifier, FileStoreTable):
            table = table_or_identifier
            if warehouse is None:
                warehouse = _local_warehouse_of(table)
            return TableRef(warehouse, table.name)
        ident = Identifier.parse(table_or_identifier)
        if warehouse is None:
            raise LakehouseError(f"table {ident} is given by name: pass warehouse= (a path or URI)")
        return TableRef(warehouse, ident.full_name())


def _local_warehouse_of(table: FileStoreTable) -> str:
    # A table lives at <warehouse>/<database>.db/<table>.
    root = os.path.dirname(os.path.dirname(table.path))
    if not table.file_io.is_local or Catalog(root).table_path(table.name) != table.path:
        raise LakehouseError(
            f"cannot tell the warehouse of table {table.name} at {table.path}: pass warehouse= "
            f"(the URI executors open the catalog with)")
    return root


class BucketMode(Enum):
    """How rows of a table find their bucket (Paimon's bucket modes)."""

    FIXED = "fixed"        # bucket > 0: hash of the bucket key modulo the partition's bucket count
    UNAWARE = "unaware"    # append table with bucket = -1: no buckets, rows written where they are
    DYNAMIC = "dynamic"    # primary key with bucket = -1: assigners keep a key -> bucket index
    POSTPONE = "postpone"  # bucket = -2: rows wait in bucket-postpone until compaction assigns them

    @staticmethod
    def of(table: FileStoreTable) -> BucketMode:
        bucket = table.options.bucket
        if bucket > 0:
            return BucketMode.FIXED
        if bucket == -2:
            return BucketMode.POSTPONE
        return BucketMode.DYNAMIC if table.schema.has_primary_key else BucketMode.UNAWARE


def check_writable(table: FileStoreTable, *, routed: bool = False) -> BucketMode:
    """The table's bucket mode, or UnsupportedError when these Spark tasks cannot write it.

    `routed`: the rows reach the tasks through `route_rows` (what `write` does), which every
    mode supports. Without it (`df.write.format("lakehouse")`, whose tasks write whatever rows
    they hold) only fixed-bucket and append tables are written: a dynamic bucket assigner must
    see every key of its slice, and postpone bucket tables are left to `write` too.
    """
    mode = BucketMode.of(table)
    if routed:
        return mode
    if mode is BucketMode.DYNAMIC:
        raise UnsupportedError(
            f"table {table.name}: df.write.format('lakehouse') cannot write dynamic bucket mode "
            f"('bucket' = -1 with a primary key), whose keys must reach their assigner's task; "
            f"use lakehouse_engine.spark.write(df, table)")
    if mode is BucketMode.POSTPONE:
        raise UnsupportedError(
            f"table {table.name}: df.write.format('lakehouse') does not write postpone bucket "
            f"mode ('bucket' = -2); use lakehouse_engine.spark.write(df, table)")
    return mode


# ---- the driver ------------------------------------------------------------------------------
def write(df: DataFrame, table_or_identifier: FileStoreTable | str | Identifier,
          warehouse: str | None = None, overwrite: Mapping[str, Any] | bool | None = None,
          *, _task_hook: TaskHook | None = None) -> list[int]:
    """Write a DataFrame into a table with Spark and commit once; returns the snapshot ids written.

    Args:
        df: rows with exactly the table's columns (any order; types cast as TableWrite does).
        table_or_identifier: a table, or its `database.table` name (then `warehouse` is required).
        warehouse: the warehouse path or URI executors open the table from.
        overwrite: None/False to append; True to overwrite the whole table; a dict of partition
            values (`{"dt": "2026-11-21"}`) to overwrite that partition (every row must be in it).
        _task_hook: called in each write task with its messages after its files are written and
            before they are returned (fault injection in tests).

    Raises:
        SchemaError: the DataFrame's columns are not the table's.
        InvalidDataError: rows fall outside the partition being overwritten.
    """
    ref = TableRef.of(table_or_identifier, warehouse)
    table = ref.open()
    check_columns(df.columns, table)
    mode = check_writable(table, routed=True)
    num_assigners = assigner_count(df.sparkSession, table) if mode is BucketMode.DYNAMIC else 1
    routed = route_rows(df, table, ref, num_assigners)
    static_partition = overwrite_partition(overwrite)
    commit = new_commit(table, static_partition)  # rejects a bad overwrite before any file is written
    task = WriteTask(ref, _task_hook, num_assigners=num_assigners, overwrite=static_partition)
    written = routed.mapInArrow(task, MESSAGE_SCHEMA)
    messages = [pickle.loads(row[MESSAGE_COLUMN]) for row in written.collect()]
    return commit_messages(table, commit, messages, static_partition)


def overwrite_partition(overwrite: Mapping[str, Any] | bool | None) -> dict[str, Any] | None:
    """The static partition an overwrite replaces (`{}`: the whole table), or None to append."""
    if overwrite is None or overwrite is False:
        return None
    if overwrite is True:
        return {}
    return dict(overwrite)


def check_columns(columns: Iterable[str], table: FileStoreTable) -> None:
    """SchemaError unless the columns are exactly the table's (in any order)."""
    names = list(columns)
    expected = table.schema.field_names
    missing = [n for n in expected if n not in names]
    extra = [n for n in names if n not in expected]
    if missing or extra:
        raise SchemaError(f"DataFrame does not match the schema of table {table.name}: missing "
                          f"columns {missing}, unexpected columns {extra}")


def assigner_count(spark: SparkSession, table: FileStoreTable) -> int:
    """How many bucket assigners (one Spark task each) a dynamic bucket write runs.

    1 for cross-partition upsert tables (one global key index); else the table's
    `dynamic-bucket.assigner-parallelism`, else `min(dynamic-bucket.initial-buckets or Spark's
    default parallelism, spark.sql.shuffle.partitions)`.
    """
    if table.schema.cross_partition_update:
        return 1
    configured = table.options.get(DYNAMIC_BUCKET_ASSIGNER_PARALLELISM)
    if configured:
        return int(configured)
    shuffle_partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
    initial = table.options.get(DYNAMIC_BUCKET_INITIAL_BUCKETS)
    if not initial:
        try:
            initial = spark.sparkContext.defaultParallelism
        except Exception:  # Spark Connect has no SparkContext
            initial = shuffle_partitions
    return max(1, min(int(initial), shuffle_partitions))


def route_rows(df: DataFrame, table: FileStoreTable, ref: TableRef,
               num_assigners: int | None = None) -> DataFrame:
    """The rows arranged so that the tasks writing them never share a bucket.

    Fixed: every (partition, bucket) in exactly one task. Dynamic: each of `num_assigners`
    tasks holds exactly the keys of one assigner (`abs(hash % n)`); by default as many as
    `assigner_count` says. Postpone and bucket-unaware append tables: unchanged, no shuffle.
    """
    mode = check_writable(table, routed=True)
    if mode in (BucketMode.UNAWARE, BucketMode.POSTPONE):
        # No bucket to choose: any task may append to any partition (Paimon does not shuffle either).
        return df
    if mode is BucketMode.DYNAMIC:
        n = num_assigners or assigner_count(df.sparkSession, table)
        if n == 1:
            return df.repartition(1)  # one assigner (a cross-partition table's global index)
        schema = StructType([*df.schema.fields, StructField(ASSIGNER_COLUMN, IntegerType(), False),
                             StructField(ROUTE_COLUMN, IntegerType(), False)])
        with_assigner = df.mapInArrow(AssignerRouter(ref, n), schema)
        # An explicit partition count: adaptive execution keeps it (it never coalesces these).
        return with_assigner.repartition(n, ROUTE_COLUMN)
    assigner = FixedBucketAssigner(ref, partition_bucket_counts(table))
    # A new StructType: `df.schema.add` would change the DataFrame's cached schema in place.
    schema = StructType([*df.schema.fields, StructField(BUCKET_COLUMN, IntegerType(), False)])
    with_bucket = df.mapInArrow(assigner, schema)
    return with_bucket.repartition(*table.schema.partition_keys, BUCKET_COLUMN)


def partition_bucket_counts(table: FileStoreTable) -> dict[bytes, int]:
    """Bucket count of each partition that has files (a rescaled partition keeps its own)."""
    latest = table.latest_snapshot()
    if latest is None:
        return {}
    return {e.partition: e.total_buckets
            for e in table.manifest_io().live_entries(latest) if e.total_buckets > 0}


def spark_hash_int(value: int, seed: int = _SPARK_HASH_SEED) -> int:
    """Spark's `Murmur3_x86_32.hashInt`: what `HashPartitioning` hashes an INT column value with."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k1 = rotl((value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = (rotl((seed & 0xFFFFFFFF) ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4  # the input length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def route_values(n: int) -> list[int]:
    """For each task i < n, an INT that `repartition(n, column)` sends to task i.

    Spark puts a row into partition `pmod(hashInt(value, 42), n)`; the i-th value is the smallest
    non-negative integer landing in partition i, so the n assigners get n distinct tasks.
    """
    values: list[int | None] = [None] * n
    missing, candidate = n, 0
    while missing:
        task = spark_hash_int(candidate) % n  # Python's % is Spark's pmod for n > 0
        if values[task] is None:
            values[task] = candidate
            missing -= 1
        candidate += 1
    return [v for v in values if v is not None]


def new_commit(table: FileStoreTable, static_partition: Mapping[str, Any] | None) -> TableCommit:
    """The commit of one write: APPEND, or OVERWRITE of `static_partition` (`{}`: the table)."""
    builder = table.new_batch_write_builder()
    if static_partition is not None:
        builder.overwrite(static_partition)
    return builder.new_commit()


def commit_messages(table: FileStoreTable, commit: TableCommit, messages: list[CommitMessage],
                    static_partition: Mapping[str, Any] | None) -> list[int]:
    """Commit every message of one write as one snapshot; returns its id (none for no rows appended)."""
    try:
        if static_partition:
            check_in_partition(table, messages, static_partition)
        return commit.commit(messages)
    except (CommitTimeoutError, InvalidDataError):
        # Both prove nothing was committed, so these files can never be referenced.
        commit.abort(messages)
        delete_new_index_files(table, messages)
        raise
    finally:
        commit.close()


def delete_new_index_files(table: FileStoreTable, messages: Iterable[CommitMessage]) -> None:
    """Delete the HASH index files dynamic bucket writers wrote for messages never committed."""
    index_dir = table.path_factory.index_dir
    for m in messages:
        for entry in m.new_index_files:
            table.file_io.delete_file(f"{index_dir}/{entry.file_name}")


def check_in_partition(table: FileStoreTable, messages: list[CommitMessage],
                       static_partition: Mapping[str, Any]) -> None:
    """InvalidDataError when a message holds files outside the partition being overwritten."""
    codec = table.partition_codec()
    for m in messages:
        values = codec.from_binary(m.partition).as_dict()
        outside = {k: values.get(k) for k, v in static_partition.items() if str(values.get(k)) != str(v)}
        if outside:
            raise InvalidDataError(
                f"overwrite of partition {dict(static_partition)} of table {table.name} got rows "
                f"of partition {values}; filter the DataFrame to that partition first")


# ---- the executors ---------------------------------------------------------------------------
def align_timestamps(data: pa.Table, arrow_schema: pa.Schema) -> pa.Table:
    """Spark TIMESTAMP (with a time zone) into Paimon TIMESTAMP (without) as Spark casts it.

    Spark's Arrow batches carry the session time zone in the type; the wall-clock time in that
    zone is what Spark's own `CAST(ts AS TIMESTAMP_NTZ)` gives. Other types are TableWrite's.
    """
    for i, name in enumerate(data.column_names):
        target = arrow_schema.field(name).type if name in arrow_schema.names else None
        actual = data.schema.field(i).type
        if (target is not None and pa.types.is_timestamp(target) and target.tz is None
                and pa.types.is_timestamp(actual) and actual.tz is not None):
            data = data.set_column(i, name, pc.local_timestamp(data.column(i)))
    return data


class FixedBucketAssigner:
    """mapInArrow function: appends each row's bucket, computed with the engine's bucket hash."""

    def __init__(self, ref: TableRef, bucket_counts: Mapping[bytes, int]):
        self.ref = ref
        self.bucket_counts = dict(bucket_counts)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = self.ref.open()
        schema = table.schema
        arrow_schema = schema.arrow_schema()
        codec = table.partition_codec()
        keys = schema.bucket_keys
        key_types = schema.types_of(keys)
        default_count = table.options.bucket
        field = pa.field(BUCKET_COLUMN, pa.int32(), nullable=False)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows = align_timestamps(pa.Table.from_batches([batch]), arrow_schema)
            rows = conform_to_schema(rows, arrow_schema, table.name)
            part_ids, partitions = codec.group_rows(rows)
            counts = np.array([self.bucket_counts.get(p.binary, default_count) for p in partitions],
                              dtype=np.int64)
            hashes = hash_rows([rows.column(k) for k in keys], key_types)
            if (counts == counts[0]).all():
                buckets = bucket_of(hashes, int(counts[0]))
            else:  # partitions rescaled to different counts: bucket_of row by row
                buckets = np.abs(np.fmod(hashes.astype(np.int64), counts[part_ids])).astype(np.int32)
            yield batch.append_column(field, pa.array(buckets, type=pa.int32()))


class AssignerRouter:
    """mapInArrow function: appends each row's dynamic bucket assigner and its route value.

    The assigner is `abs(hash % n)` of the key hash TableWrite computes (the primary key minus
    the partition fields); the route value makes `repartition(n, route)` put assigner i in task i.
    """

    def __init__(self, ref: TableRef, num_assigners: int):
        self.ref = ref
        self.num_assigners = num_assigners

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = self.ref.open()
        schema = table.schema
        arrow_schema = schema.arrow_schema()
        keys = schema.trimmed_primary_keys
        key_types = schema.types_of(keys)
        routes = np.array(route_values(self.num_assigners), dtype=np.int32)
        assigner_field = pa.field(ASSIGNER_COLUMN, pa.int32(), nullable=False)
        route_field = pa.field(ROUTE_COLUMN, pa.int32(), nullable=False)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows = align_timestamps(pa.Table.from_batches([batch]), arrow_schema)
            rows = conform_to_schema(rows, arrow_schema, table.name)
            assigners = assigner_of(hash_rows([rows.column(k) for k in keys], key_types),
                                    self.num_assigners).astype(np.int32)
            yield (batch.append_column(assigner_field, pa.array(assigners, type=pa.int32()))
                   .append_column(route_field, pa.array(routes[assigners], type=pa.int32())))


class WriteTask:
    """mapInArrow function: writes the task's rows with TableWrite, yields its pickled CommitMessages."""

    def __init__(self, ref: TableRef, hook: TaskHook | None = None, *, num_assigners: int = 1,
                 overwrite: Mapping[str, Any] | None = None):
        self.ref = ref
        self.hook = hook
        self.num_assigners = num_assigners
        self.overwrite = dict(overwrite) if overwrite is not None else None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        messages = write_batches(self.ref.open(), batches, num_assigners=self.num_assigners,
                                 overwrite=self.overwrite)
        if self.hook is not None:
            self.hook(messages)
        if messages:
            payload = pa.array([pickle.dumps(m) for m in messages], type=pa.binary())
            yield pa.RecordBatch.from_arrays([payload], schema=_MESSAGE_ARROW_SCHEMA)


def write_batches(table: FileStoreTable, batches: Iterable[pa.RecordBatch], write_only: bool = False,
                  *, num_assigners: int = 1, overwrite: Mapping[str, Any] | None = None) -> list[CommitMessage]:
    """Write Arrow batches (routing columns are dropped) and return the CommitMessages.

    TableWrite compacts the buckets it wrote before returning its messages, which is right when
    it is the bucket's only writer; `write_only` skips that, for tasks that may share buckets.
    `num_assigners` > 1: the batches are the rows of one dynamic bucket assigner (their
    `__lakehouse_assigner` column says which). `overwrite`: the partition (`{}`: the table) the
    commit replaces; dynamic bucket indexes then start empty.
    """
    sink = _TaskSink(table, write_only, num_assigners, overwrite)
    arrow_schema = table.schema.arrow_schema()
    try:
        pending: list[pa.RecordBatch] = []
        pending_rows = 0
        for batch in batches:
            batch = sink.strip_routing(batch)
            if batch.num_rows == 0:
                continue
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows >= _WRITE_CHUNK_ROWS:
                sink.write(align_timestamps(pa.Table.from_batches(pending), arrow_schema))
                pending, pending_rows = [], 0
        if pending:
            sink.write(align_timestamps(pa.Table.from_batches(pending), arrow_schema))
        return sink.prepare_commit()
    finally:
        sink.close()


class _TaskSink:
    """The TableWrite(s) of one Spark task.

    One TableWrite, created on the first rows (a dynamic bucket task learns its assigner id from
    them). Dynamic bucket mode with n > 1 assigners adds a second, write-only one: a task may
    compact a bucket only as its sole writer, which holds for a partition whose index agrees with
    n (every key hash h in bucket b has `abs(h % n) == b % n`: assigner i then only touches
    buckets `b % n == i`). A partition indexed with another n (an earlier write with another
    assigner count, or the engine's single writer) can have keys of several assigners in one
    bucket, so its rows go to the write-only writer: they land as level-0 files for `compact`.
    """

    def __init__(self, table: FileStoreTable, write_only: bool, num_assigners: int,
                 overwrite: Mapping[str, Any] | None):
        self.table = table
        self.write_only = write_only
        self.num_assigners = num_assigners
        self.overwrite = overwrite
        self.assigner_id: int | None = None
        self._writers: dict[bool, TableWrite] = {}  # by write-only
        # An overwrite starts from empty indexes, which agree with any n.
        self._check_alignment = (num_assigners > 1 and overwrite is None and not write_only
                                 and BucketMode.of(table) is BucketMode.DYNAMIC)
        self._aligned: dict[bytes, bool] = {}
        self._index_files: dict[bytes, list[tuple[int, str]]] | None = None

    def strip_routing(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch without routing columns; checks every row belongs to this task's assigner."""
        names = batch.schema.names
        if ASSIGNER_COLUMN in names and batch.num_rows:
            ids = pc.unique(batch.column(names.index(ASSIGNER_COLUMN))).to_pylist()
            if self.assigner_id is None:
                self.assigner_id = ids[0]
            if ids != [self.assigner_id]:
                raise LakehouseError(
                    f"table {self.table.name}: one Spark task got rows of dynamic bucket assigners "
                    f"{sorted({self.assigner_id, *ids})} of {self.num_assigners}; each assigner "
                    f"must be exactly one task")
        drop = [c for c in _ROUTING_COLUMNS if c in names]
        return batch.drop_columns(drop) if drop else batch

    def _writer(self, write_only: bool) -> TableWrite:
        writer = self._writers.get(write_only)
        if writer is None:
            table = self.table.copy({WRITE_ONLY.key: "true"}) if write_only else self.table
            builder = table.new_batch_write_builder()
            if self.overwrite is not None:
                builder.overwrite(self.overwrite)
            if self.num_assigners > 1:
                if self.assigner_id is None:
                    raise LakehouseError(
                        f"table {self.table.name}: rows reached a dynamic bucket write task "
                        f"without their '{ASSIGNER_COLUMN}' column")
                writer = builder.new_write(num_assigners=self.num_assigners, assigner_id=self.assigner_id)
            else:
                writer = builder.new_write()
            self._writers[write_only] = writer
        return writer

    def write(self, data: pa.Table) -> None:
        if not self._check_alignment:
            self._writer(self.write_only).write_arrow(data)
            return
        rows = conform_to_schema(data, self.table.schema.arrow_schema(), self.table.name)
        part_ids, partitions = self.table.partition_codec().group_rows(rows)
        aligned = np.array([self._is_aligned(p.binary) for p in partitions], dtype=bool)
        if aligned.all():
            self._writer(False).write_arrow(rows)
        elif not aligned.any():
            self._writer(True).write_arrow(rows)
        else:  # filtering keeps each partition's rows (so each key's rows) in arrival order
            mask = pa.array(aligned[part_ids])
            self._writer(False).write_arrow(rows.filter(mask))
            self._writer(True).write_arrow(rows.filter(pc.invert(mask)))

    def _is_aligned(self, partition: bytes) -> bool:
        """Whether the partition's HASH index puts every key hash h in a bucket b with
        `abs(h % n) == b % n` (reads the partition's index files of the latest snapshot)."""
        known = self._aligned.get(partition)
        if known is not None:
            return known
        if self._index_files is None:
            self._index_files = {}
            latest = self.table.latest_snapshot()
            name = latest.index_manifest if latest is not None else None
            for e in self.table.manifest_io().read_index_manifest(name) if name else []:
                if e.index_type == HASH_INDEX and e.kind == FileKind.ADD:
                    self._index_files.setdefault(e.partition, []).append((e.bucket, e.file_name))
        n = self.num_assigners
        aligned = True
        for bucket, file_name in self._index_files.get(partition, []):
            path = f"{self.table.path_factory.index_dir}/{file_name}"
            hashes = decode_hashes(self.table.file_io.read_bytes(path), path)
            if not (assigner_of(hashes, n) == bucket % n).all():
                aligned = False
                break
        self._aligned[partition] = aligned
        return aligned

    def prepare_commit(self) -> list[CommitMessage]:
        return [m for writer in self._writers.values() for m in writer.prepare_commit()]

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
