"""Distributed writes: route a DataFrame's rows to the tasks that may write them (`routing`), run
the engine's TableWrite in each task, and commit the tasks' CommitMessages once on the driver.

Routing depends on the table's bucket mode: fixed buckets shuffle by (partition, bucket) with
the engine's hash; dynamic buckets shuffle by key hash so that each task is one of n bucket
assigners; postpone buckets and bucket-unaware append tables are written where the rows are.

Exactly-once: tasks only write data and index files (names are unique per attempt) and return
their CommitMessages as rows; the driver commits the messages of the rows `collect()` returned.
Spark returns one result per partition, from the attempt it kept, so files written by failed or
losing speculative attempts are never committed: they are orphans for `remove_orphan_files`.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, StructField, StructType

from lakehouse_engine.catalog import Identifier
from lakehouse_engine.errors import (
    CommitTimeoutError,
    InvalidDataError,
    LakehouseError,
    SchemaError,
)
from lakehouse_engine.options import DYNAMIC_PARTITION_OVERWRITE, WRITE_ONLY
from lakehouse_engine.spark.routing import (
    ROWS_COLUMN,
    assigner_count,
    route_rows,
    unpack_routed,
)
from lakehouse_engine.spark.tables import (
    BucketMode,
    TableRef,
    align_timestamps,
    rechunk,
)
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.commit_retry import snapshots_of_commit
from lakehouse_engine.write.table_commit import BATCH_COMMIT_IDENTIFIER, TableCommit
from lakehouse_engine.write.table_write import TableWrite, conform_to_schema

MESSAGE_COLUMN = "message"
MESSAGE_SCHEMA = StructType([StructField(MESSAGE_COLUMN, BinaryType(), False)])
_MESSAGE_ARROW_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary(), nullable=False)])
# A task hands TableWrite at least this many rows at a time (Spark's Arrow batches are small).
_WRITE_CHUNK_ROWS = 262_144

TaskHook = Callable[[list[CommitMessage]], None]


# ---- the driver ------------------------------------------------------------------------------
def write(df: DataFrame, table_or_identifier: FileStoreTable | str | Identifier,
          warehouse: str | None = None, overwrite: Mapping[str, Any] | bool | None = None,
          *, commit_user: str | None = None, merge_schema: bool = False,
          _task_hook: TaskHook | None = None) -> list[int]:
    """Write a DataFrame into a table with Spark and commit once; returns the snapshot ids written.

    Args:
        df: rows with exactly the table's columns (any order; types cast as TableWrite does).
        table_or_identifier: a table, or its `database.table` name (then `warehouse` is required).
        warehouse: the warehouse path or URI executors open the table from.
        overwrite: None/False to append; True to overwrite the whole table; a dict of partition
            values (`{"dt": "2026-11-21"}`) to overwrite that partition (every row must be in it).
        commit_user: commit as this user (a job's stable name for this write): when a snapshot
            of it has landed already (a rerun after a crash or a PostCommitError), nothing is
            written again and its snapshot ids are returned.
        merge_schema: Paimon's `write.merge-schema` (also honoured as a table option): columns
            the table lacks are added to it first, nullable columns the DataFrame lacks are
            written as nulls. Without it such a DataFrame raises SchemaError naming the columns.
        _task_hook: called in each write task with its messages after its files are written and
            before they are returned (fault injection in tests).

    Raises:
        SchemaError: the DataFrame's columns are not the table's.
        InvalidDataError: rows fall outside the partition being overwritten.
        PostCommitError: the data is committed (its `snapshot_ids`), the compaction after it failed.
    """
    ref = TableRef.of(table_or_identifier, warehouse)
    table = ref.open()
    from lakehouse_engine.spark.merge_schema import merge_dataframe_schema, merge_schema_requested

    if merge_schema or merge_schema_requested(table):
        df, table = merge_dataframe_schema(df, ref, table)
    check_columns(df.columns, table)
    mode = BucketMode.of(table)
    num_assigners = assigner_count(df.sparkSession, table) if mode.assigns_dynamically else 1
    routed = route_rows(df, table, ref, num_assigners)
    static_partition = overwrite_partition(overwrite)
    # Rejects a bad overwrite before any file is written.
    commit = new_commit(table, static_partition, commit_user)
    if commit_user is not None:
        landed = snapshots_of_commit(table.store, commit_user, BATCH_COMMIT_IDENTIFIER, None)
        if landed.by_kind:
            return sorted(landed.by_kind.values())
    # The tasks write under the driver's commit user, so its commit knows the messages are its own.
    task = WriteTask(ref, _task_hook, num_assigners=num_assigners, overwrite=static_partition,
                     commit_user=commit.commit_user)
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
        hint = (" (to add them to the table, write with merge_schema=True or option "
                "'write.merge-schema' = 'true')" if extra else "")
        raise SchemaError(f"DataFrame does not match the schema of table {table.name}: missing "
                          f"columns {missing}, unexpected columns {extra}{hint}")


def new_commit(table: FileStoreTable, static_partition: Mapping[str, Any] | None,
               commit_user: str | None = None) -> TableCommit:
    """The commit of one write: APPEND, or OVERWRITE of `static_partition` (`{}`: the table), as
    `commit_user` when given.

    `{}` replaces the whole table, as Spark's default (static) overwrite mode does, whatever the
    table's `dynamic-partition-overwrite` (which the engine's own `overwrite()` follows).
    """
    if static_partition is not None and not static_partition:
        table = table.copy({DYNAMIC_PARTITION_OVERWRITE.key: "false"})
    builder = table.new_batch_write_builder()
    if commit_user is not None:
        builder.with_commit_user(commit_user)
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
        commit.abort(messages)  # their data and index files
        raise
    finally:
        commit.close()


def check_in_partition(table: FileStoreTable, messages: list[CommitMessage],
                       static_partition: Mapping[str, Any]) -> None:
    """InvalidDataError when a message holds files outside the partition being overwritten."""
    codec = table.store.partition_codec()
    for m in messages:
        values = codec.from_binary(m.partition).as_dict()
        outside = {k: values.get(k) for k, v in static_partition.items() if str(values.get(k)) != str(v)}
        if outside:
            raise InvalidDataError(
                f"overwrite of partition {dict(static_partition)} of table {table.name} got rows "
                f"of partition {values}; filter the DataFrame to that partition first")


# ---- the executors ---------------------------------------------------------------------------
class WriteTask:
    """mapInArrow function: writes the task's rows with TableWrite, yields its pickled CommitMessages."""

    def __init__(self, ref: TableRef, hook: TaskHook | None = None, *, num_assigners: int = 1,
                 overwrite: Mapping[str, Any] | None = None, commit_user: str | None = None):
        self.ref = ref
        self.commit_user = commit_user
        self.hook = hook
        self.num_assigners = num_assigners
        self.overwrite = dict(overwrite) if overwrite is not None else None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        messages = write_batches(self.ref.open(), batches, num_assigners=self.num_assigners,
                                 overwrite=self.overwrite, commit_user=self.commit_user)
        if self.hook is not None:
            self.hook(messages)
        if messages:
            payload = pa.array([pickle.dumps(m) for m in messages], type=pa.binary())
            yield pa.RecordBatch.from_arrays([payload], schema=_MESSAGE_ARROW_SCHEMA)


def write_batches(table: FileStoreTable, batches: Iterable[pa.RecordBatch], write_only: bool = False,
                  *, num_assigners: int = 1, overwrite: Mapping[str, Any] | None = None,
                  commit_user: str | None = None) -> list[CommitMessage]:
    """Write Arrow batches (table rows, or routed rows packed by `RowPacker`) and return the
    CommitMessages.

    TableWrite compacts the buckets it wrote before returning its messages, which is right when
    it is the bucket's only writer; `write_only` skips that, for tasks that may share buckets.
    `num_assigners` > 1: the batches are the routed rows of one dynamic bucket assigner.
    `overwrite`: the partition (`{}`: the table) the commit replaces; dynamic bucket indexes then
    start empty. `commit_user`: the driver's, which the messages then carry.
    """
    sink = _TaskSink(table, write_only, num_assigners, overwrite, commit_user)
    arrow_schema = table.schema.arrow_schema()
    try:
        for rows in rechunk(_table_rows(sink, batches), _WRITE_CHUNK_ROWS):
            sink.write(align_timestamps(rows, arrow_schema))
        return sink.prepare_commit()
    finally:
        sink.close()


def _table_rows(sink: _TaskSink, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The table rows of a task's batches: routed batches are unpacked, others pass as they are."""
    for batch in batches:
        if ROWS_COLUMN not in batch.schema.names:
            yield batch
            continue
        for assigner, rows in unpack_routed(batch):
            sink.check_assigner(assigner)
            yield rows


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
                 overwrite: Mapping[str, Any] | None, commit_user: str | None = None):
        self.table = table
        self.commit_user = commit_user
        self.write_only = write_only
        self.num_assigners = num_assigners
        self.overwrite = overwrite
        self.assigner_id: int | None = None
        self._writers: dict[bool, TableWrite] = {}  # by write-only
        # An overwrite starts from empty indexes, which agree with any n.
        self._check_alignment = (num_assigners > 1 and overwrite is None and not write_only
                                 and table.bucket_mode().assigns_dynamically)

    def check_assigner(self, assigner: int) -> None:
        """Remember the task's dynamic bucket assigner; every routed row must be of that one."""
        if assigner < 0:
            return
        if self.assigner_id is None:
            self.assigner_id = assigner
        elif assigner != self.assigner_id:
            raise LakehouseError(
                f"table {self.table.name}: one Spark task got rows of dynamic bucket assigners "
                f"{sorted({self.assigner_id, assigner})} of {self.num_assigners}; each assigner "
                f"must be exactly one task")

    def _writer(self, write_only: bool) -> TableWrite:
        writer = self._writers.get(write_only)
        if writer is None:
            table = self.table.copy({WRITE_ONLY.key: "true"}) if write_only else self.table
            commit_user = self.commit_user or table.new_batch_write_builder().commit_user
            if self.num_assigners > 1 and self.assigner_id is None:
                raise LakehouseError(
                    f"table {self.table.name}: rows reached a dynamic bucket write task "
                    f"without being routed to an assigner")
            writer = TableWrite.for_spark_task(table.store, commit_user, (self.assigner_id or 0) if self.num_assigners > 1 else 0,
                                               self.num_assigners, overwrite=self.overwrite is not None)
            self._writers[write_only] = writer
        return writer

    def write(self, data: pa.Table) -> None:
        if not self._check_alignment:
            self._writer(self.write_only).write_arrow(data)
            return
        rows = conform_to_schema(data, self.table.schema.arrow_schema(), self.table.name)
        part_ids, partitions = self.table.store.partition_codec().group_rows(rows)
        assigner = self._writer(False).dynamic_assigner()  # its restored index tells
        aligned = np.array([assigner.aligned(p.binary) for p in partitions], dtype=bool)
        if aligned.all():
            self._writer(False).write_arrow(rows)
        elif not aligned.any():
            self._writer(True).write_arrow(rows)
        else:  # filtering keeps each partition's rows (so each key's rows) in arrival order
            mask = pa.array(aligned[part_ids])
            self._writer(False).write_arrow(rows.filter(mask))
            self._writer(True).write_arrow(rows.filter(pc.invert(mask)))

    def prepare_commit(self) -> list[CommitMessage]:
        return [m for writer in self._writers.values() for m in writer.prepare_commit()]

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
