"""Postpone-bucket compaction: move rows from `bucket-postpone/` into real buckets.

Writes to a `bucket` = -2 table land in `bucket-postpone/`, invisible to readers. Compaction
reads a partition's postpone files in sequence order and writes their rows into fixed buckets:
the partition's existing bucket count if it has buckets, else `postpone.default-bucket-num`.
One COMPACT snapshot deletes the postpone files and adds the bucket files, so readers see the
rows exactly once, and partitions may differ in bucket count.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse_engine.format.features import check_entry, check_writable
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.range_merge import merge_budget
from lakehouse_engine.options import POSTPONE_DEFAULT_BUCKET_NUM
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.schema import VALUE_KIND
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.freed_memory import FreedMemory
from lakehouse_engine.write.table_write import TableWrite
from lakehouse_engine.write.write_builder import BatchWriteBuilder

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def compact_postpone(table: FileStore, partitions: Sequence[Mapping[str, Any]] | None = None,
                     expire: Callable[[], None] | None = None) -> list[int]:
    """Move every postpone file (of `partitions`, or all) into real buckets; one COMPACT snapshot.
    `expire` runs after the commit landed."""
    codec = table.partition_codec()
    codec.check_spec_keys(partitions or [], table.name, "compact")
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return []
    postponed: dict[bytes, list[DataFileMeta]] = defaultdict(list)
    counts: dict[bytes, int] = {}
    mio = table.manifest_io()
    check_writable(table.name, table.options, snapshot, mio.index_entries(snapshot),
                   table.schema.has_primary_key)
    for e in mio.live_entries(snapshot):
        check_entry(table.name, e)
        if e.bucket == POSTPONE_BUCKET:
            if codec.from_binary(e.partition).matches(partitions or None):
                postponed[e.partition].append(e.file)
        elif e.total_buckets > 0:
            counts[e.partition] = e.total_buckets
    if not postponed:
        return []
    default = table.options.require(POSTPONE_DEFAULT_BUCKET_NUM)
    buckets = {p: counts.get(p, default) for p in postponed}
    # The moved rows land as level-0 runs (regular compaction follows), as the output of this
    # compaction: one atomic COMPACT adds them and deletes the postpone files.
    writer = TableWrite.for_postpone_compaction(table, f"postpone-compact-{uuid.uuid4()}", buckets, default)
    schema = table.schema.arrow_schema()
    columns = schema.names + [VALUE_KIND]
    file_schema = table.schema.data_file_arrow_schema()
    read_schema = pa.schema([file_schema.field(c) for c in columns])
    deletes: list[CommitMessage] = []
    reader = table.file_reader(for_rewrite=True)
    budget = merge_budget(table.options)
    # The allocator's freed pages back to the OS as the rows go (see write/freed_memory.py).
    freed = FreedMemory(budget)
    for partition, files in sorted(postponed.items()):
        bucket_dir = table.path_factory.bucket_dir(codec.from_binary(partition).spec, POSTPONE_BUCKET)
        # Files in commit order (live entries keep the order their commits added them): the
        # writer numbers rows as they arrive, above what the target bucket holds, so rows of
        # later commits win. Not by sequence number: other writers (pypaimon) number each
        # commit's postpone files from 0, so only the commit order tells which came last.
        # Each file batch by batch (`sort-spill-buffer-size`): with the writer's buffer, memory
        # stays bounded however many rows were postponed.
        for f in files:
            for rows in reader.read_batches(f"{bucket_dir}/{f.file_name}", columns, read_schema,
                                            f, budget):
                kinds = rows.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
                writer.write_rows(rows.select(schema.names), kinds)
                freed.add(rows.nbytes)
        deletes.append(CommitMessage(partition, POSTPONE_BUCKET, POSTPONE_BUCKET, compact_before=list(files)))
    moved = writer.prepare_commit()
    commit = BatchWriteBuilder(table, expire=expire).new_commit()
    return commit.commit(moved + deletes)
