"""Distributed writes: bucket a DataFrame with the engine's hash, shuffle by (partition, bucket),
run the engine's TableWrite in each task, and commit the tasks' CommitMessages once on the driver.

Exactly-once: tasks only write data files (names are unique per attempt) and return their
CommitMessages as rows; the driver commits the messages of the rows `collect()` returned. Spark
returns one result per partition, from the attempt it kept, so files written by failed or
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
from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

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
from lakehouse_engine.options import WRITE_ONLY
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.table_write import conform_to_schema

# The column that carries each row's bucket through the shuffle (dropped before writing).
BUCKET_COLUMN = "__lakehouse_bucket"
MESSAGE_COLUMN = "message"
MESSAGE_SCHEMA = StructType([StructField(MESSAGE_COLUMN, BinaryType(), False)])
_MESSAGE_ARROW_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary(), nullable=False)])
# A task hands TableWrite at least this many rows at a time (Spark's Arrow batches are small).
_WRITE_CHUNK_ROWS = 262_144

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


def check_writable(table: FileStoreTable) -> BucketMode:
    """The table's bucket mode; UnsupportedError for the modes Spark writes cannot do yet."""
    mode = BucketMode.of(table)
    if mode is BucketMode.DYNAMIC:
        # To come: shuffle by key hash to the assigner tasks, each runs the engine's dynamic
        # bucket assigner for its slice of keys, then shuffle by (partition, bucket) as FIXED does.
        raise UnsupportedError(
            f"table {table.name}: Spark writes into dynamic bucket mode ('bucket' = -1 with a "
            f"primary key) are not supported yet; set 'bucket' to a positive count")
    if mode is BucketMode.POSTPONE:
        # To come: no assignment and no shuffle by bucket; rows go to bucket-postpone as they are.
        raise UnsupportedError(
            f"table {table.name}: Spark writes into postpone bucket mode ('bucket' = -2) are not "
            f"supported yet")
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
        UnsupportedError: dynamic or postpone bucket mode.
        SchemaError: the DataFrame's columns are not the table's.
        InvalidDataError: rows fall outside the partition being overwritten.
    """
    ref = TableRef.of(table_or_identifier, warehouse)
    table = ref.open()
    check_columns(df.columns, table)
    routed = route_rows(df, table, ref)
    static_partition = overwrite_partition(overwrite)
    commit = new_commit(table, static_partition)  # rejects a bad overwrite before any file is written
    written = routed.mapInArrow(WriteTask(ref, _task_hook), MESSAGE_SCHEMA)
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


def route_rows(df: DataFrame, table: FileStoreTable, ref: TableRef) -> DataFrame:
    """The rows arranged so that every (partition, bucket) is written by exactly one task."""
    mode = check_writable(table)
    if mode is BucketMode.UNAWARE:
        return df  # any task may append to any partition: no shuffle (Paimon's default too)
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
        raise
    finally:
        commit.close()


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


class WriteTask:
    """mapInArrow function: writes the task's rows with TableWrite, yields its pickled CommitMessages."""

    def __init__(self, ref: TableRef, hook: TaskHook | None = None):
        self.ref = ref
        self.hook = hook

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        messages = write_batches(self.ref.open(), batches)
        if self.hook is not None:
            self.hook(messages)
        if messages:
            payload = pa.array([pickle.dumps(m) for m in messages], type=pa.binary())
            yield pa.RecordBatch.from_arrays([payload], schema=_MESSAGE_ARROW_SCHEMA)


def write_batches(table: FileStoreTable, batches: Iterable[pa.RecordBatch],
                  write_only: bool = False) -> list[CommitMessage]:
    """Write Arrow batches (a bucket column, if any, is dropped) and return the CommitMessages.

    TableWrite compacts the buckets it wrote before returning its messages, which is right when
    it is the bucket's only writer; `write_only` skips that, for tasks that may share buckets.
    """
    if write_only:
        table = table.copy({WRITE_ONLY.key: "true"})
    write = table.new_batch_write_builder().new_write()
    arrow_schema = table.schema.arrow_schema()
    try:
        pending: list[pa.RecordBatch] = []
        pending_rows = 0
        for batch in batches:
            if BUCKET_COLUMN in batch.schema.names:
                batch = batch.drop_columns([BUCKET_COLUMN])
            if batch.num_rows == 0:
                continue
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows >= _WRITE_CHUNK_ROWS:
                write.write_arrow(align_timestamps(pa.Table.from_batches(pending), arrow_schema))
                pending, pending_rows = [], 0
        if pending:
            write.write_arrow(align_timestamps(pa.Table.from_batches(pending), arrow_schema))
        return write.prepare_commit()
    finally:
        write.close()
