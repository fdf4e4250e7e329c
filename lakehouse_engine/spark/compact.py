"""Distributed compaction: one Spark task per (partition, bucket), one COMPACT commit on the driver."""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from lakehouse_engine.catalog import Identifier
from lakehouse_engine.compact.task import CompactTask
from lakehouse_engine.errors import CommitTimeoutError
from lakehouse_engine.spark.write import MESSAGE_COLUMN, MESSAGE_SCHEMA, TableRef
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_message import CommitMessage

_TASK_ID = "id"
_MESSAGE_ARROW_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary(), nullable=False)])


def compact(spark: SparkSession, table: FileStoreTable | str | Identifier, full: bool = False,
            partitions: Sequence[Mapping[str, Any]] | None = None,
            warehouse: str | None = None) -> list[int]:
    """Compact a table's buckets on Spark executors and commit once; returns the snapshot ids.

    1. The driver plans one CompactTask per (partition, bucket) that has work (`plan_compaction`).
    2. Spark runs task i in partition i of `spark.range(n, numPartitions=n)`: one task each.
    3. Each task re-opens the table and runs `run_compact_task`; its CommitMessage comes back as a
       row, from the attempt Spark kept (files of failed attempts are orphans).
    4. The driver commits every message in one COMPACT snapshot.

    Args:
        spark: the session to run on.
        table: a table, or its `database.table` name (then `warehouse` is required).
        full: rewrite every bucket into one sorted run (else Paimon's universal compaction picks).
        partitions: compact only these partitions (dicts of partition values); all when None.
        warehouse: the warehouse path or URI executors open the table from.
    """
    from lakehouse_engine.compact.table_compact import plan_compaction

    ref = TableRef.of(table, warehouse)
    opened = ref.open()
    tasks = plan_compaction(opened, full, partitions)
    if not tasks:
        return []
    runs = spark.range(0, len(tasks), 1, numPartitions=len(tasks))
    results = runs.mapInArrow(CompactRunner(ref, tasks), MESSAGE_SCHEMA).collect()
    messages: list[CommitMessage] = [pickle.loads(row[MESSAGE_COLUMN]) for row in results]
    if not messages:
        return []
    commit = opened.new_batch_write_builder().new_commit()
    try:
        return commit.commit(messages)
    except CommitTimeoutError:
        # Nothing was committed: drop the files the compaction wrote (not the ones it only moved).
        from lakehouse_engine.compact.table_compact import delete_new_files

        delete_new_files(opened, messages)
        raise
    finally:
        commit.close()


class CompactRunner:
    """mapInArrow function: runs the CompactTasks whose index arrives as a row `id`."""

    def __init__(self, ref: TableRef, tasks: Sequence[CompactTask]):
        self.ref = ref
        self.tasks = list(tasks)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from lakehouse_engine.compact.table_compact import run_compact_task

        table = self.ref.open()
        payloads = []
        for batch in batches:
            for index in batch.column(_TASK_ID).to_pylist():
                message = run_compact_task(table, self.tasks[index])
                if message is not None:
                    payloads.append(pickle.dumps(message))
        if payloads:
            yield pa.RecordBatch.from_arrays([pa.array(payloads, type=pa.binary())],
                                             schema=_MESSAGE_ARROW_SCHEMA)
