"""Distributed compaction: one Spark task per (partition, bucket), one COMPACT commit on the driver.

Postpone bucket tables first move their postponed rows into real buckets, on the driver, with the
engine's postpone compaction (its own COMPACT commit).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from lakehouse_engine.catalog import Identifier
from lakehouse_engine.compact.task import CompactTask
from lakehouse_engine.errors import CommitTimeoutError
from lakehouse_engine.partition import Partition
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.schema import BucketMode
from lakehouse_engine.spark.tables import TableRef
from lakehouse_engine.spark.write import MESSAGE_COLUMN, MESSAGE_SCHEMA
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_message import CommitMessage, delete_message_files

_TASK_ID = "id"
_MESSAGE_ARROW_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary(), nullable=False)])

PartitionSpec = Mapping[str, Any]


def compact(spark: SparkSession, table: FileStoreTable | str | Identifier, full: bool = False,
            partitions: Sequence[PartitionSpec] | None = None,
            buckets: Iterable[tuple[PartitionSpec, int]] | None = None,
            warehouse: str | None = None) -> list[int]:
    """Compact a table's buckets on Spark executors and commit once; returns the snapshot ids.

    0. A postpone bucket table (`bucket` = -2) first moves its postponed rows into real buckets
       on the driver (`compact_postpone`, one COMPACT snapshot).
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
        buckets: compact only these (partition values, bucket) pairs, e.g. `[({"dt": "2026-11-21"},
            3)]`; a partition dict may name some partition keys only (`{}`: every partition).
            Bucket -2 is a partition's postpone bucket: listing it moves that partition's
            postponed rows. With `partitions` too, a bucket must be in one of them.
        warehouse: the warehouse path or URI executors open the table from.

    Raises:
        LakehouseError: a partition dict names a field that is not a partition key.
    """
    from lakehouse_engine.compact.table_compact import plan_compaction

    ref = TableRef.of(table, warehouse)
    opened = ref.open()
    wanted = None if buckets is None else [(dict(spec), int(bucket)) for spec, bucket in buckets]
    opened.store.partition_codec().check_spec_keys([*(partitions or []), *(spec for spec, _ in wanted or [])],
                                             opened.name, "compact")
    ids: list[int] = []
    if opened.bucket_mode() is BucketMode.POSTPONE_MODE:
        ids += _compact_postponed(opened, partitions, wanted)
    if wanted is not None and not any(bucket != POSTPONE_BUCKET for _, bucket in wanted):
        return ids
    codec = opened.store.partition_codec()
    tasks = [t for t in plan_compaction(opened.store, full, partitions)
             if wanted is None or _bucket_wanted(codec.from_binary(t.partition), t.bucket, wanted)]
    if not tasks:
        return ids
    runs = spark.range(0, len(tasks), 1, numPartitions=len(tasks))
    results = runs.mapInArrow(CompactRunner(ref, tasks), MESSAGE_SCHEMA).collect()
    messages: list[CommitMessage] = [pickle.loads(row[MESSAGE_COLUMN]) for row in results]
    if not messages:
        return ids
    commit = opened.new_batch_write_builder().new_commit()
    try:
        return ids + commit.commit(messages)
    except CommitTimeoutError:
        # Nothing was committed: drop the files the compaction wrote (not the ones it only moved).
        delete_message_files(opened.store, messages, compaction_only=True)
        raise
    finally:
        commit.close()


def _compact_postponed(table: FileStoreTable, partitions: Sequence[PartitionSpec] | None,
                       wanted: list[tuple[dict[str, Any], int]] | None) -> list[int]:
    """Move the postponed rows the arguments ask for into real buckets (on the driver)."""
    from lakehouse_engine.compact.postpone import compact_postpone

    if wanted is None:
        return compact_postpone(table.store, list(partitions) if partitions else None,
                                table.expire_after_commit)
    specs = [spec for spec, bucket in wanted if bucket == POSTPONE_BUCKET]
    if partitions:
        specs = [s for s in (_intersect(a, b) for a in specs for b in partitions) if s is not None]
    # (compact_postpone takes no partitions as "all": only call it with some.)
    return compact_postpone(table.store, specs, table.expire_after_commit) if specs else []


def _bucket_wanted(partition: Partition, bucket: int, wanted: Sequence[tuple[PartitionSpec, int]]) -> bool:
    return any(b == bucket and partition.matches([spec]) for spec, b in wanted)


def _intersect(a: PartitionSpec, b: PartitionSpec) -> dict[str, Any] | None:
    """The partitions both specs select, as one spec; None when they exclude each other."""
    if any(k in b and str(b[k]) != str(v) for k, v in a.items()):
        return None
    return {**a, **b}


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
                message = run_compact_task(table.store, self.tasks[index])
                if message is not None:
                    payloads.append(pickle.dumps(message))
        if payloads:
            yield pa.RecordBatch.from_arrays([pa.array(payloads, type=pa.binary())],
                                             schema=_MESSAGE_ARROW_SCHEMA)
