"""Append-table compaction: merge small files, oldest first, as Paimon's append compaction does.

Files of a (partition, bucket) are taken in sequence order. A sliding window of files below
`target-file-size` grows until it holds `target-file-size` bytes in at least
`compaction.min.file-num` files, or `compaction.max.file-num` files; that window is rewritten as
one rolling run. Full compaction rewrites every small file of the bucket.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse_engine.compact.task import CompactTask
from lakehouse_engine.format.features import check_entry, check_writable
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_COMPACT, DataFileWriter
from lakehouse_engine.options import COMPACTION_MAX_FILE_NUM, COMPACTION_MIN_FILE_NUM
from lakehouse_engine.write.commit_message import CommitMessage

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def pick_append_files(files: Sequence[DataFileMeta], target_size: int, min_num: int, max_num: int,
                      full: bool) -> list[DataFileMeta]:
    """The files to rewrite together (empty when nothing is worth compacting)."""
    small = [f for f in sorted(files, key=lambda f: f.min_sequence_number) if f.file_size < target_size]
    if full:
        return small if len(small) > 1 else []
    window: list[DataFileMeta] = []
    total = 0
    for f in small:
        window.append(f)
        total += f.file_size
        if (total >= target_size and len(window) >= min_num) or len(window) >= max_num:
            return window
        while total >= target_size and len(window) > 1:
            total -= window.pop(0).file_size
    return []


def _options(table: FileStore) -> tuple[int, int, int]:
    opts = table.options
    return (opts.target_file_size(False), opts.require(COMPACTION_MIN_FILE_NUM),
            opts.require(COMPACTION_MAX_FILE_NUM))


def plan_append_compaction(table: FileStore, full: bool,
                           partitions: Sequence[Mapping[str, Any]] | None) -> list[CompactTask]:
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return []
    codec = table.partition_codec()
    groups: dict[tuple[bytes, int], list[Any]] = defaultdict(list)
    mio = table.manifest_io()
    check_writable(table.name, table.options, snapshot, mio.index_entries(snapshot),
                   table.schema.has_primary_key)
    for e in mio.live_entries(snapshot):
        check_entry(table.name, e)
        if partitions and not codec.from_binary(e.partition).matches(partitions):
            continue
        groups[(e.partition, e.bucket)].append(e)
    target, min_num, max_num = _options(table)
    tasks = []
    for (partition, bucket), entries in sorted(groups.items()):
        files = [e.file for e in entries]
        if pick_append_files(files, target, min_num, max_num, full):
            tasks.append(CompactTask(snapshot.id, partition, bucket, entries[0].total_buckets, files, full))
    return tasks


def run_append_compact_task(table: FileStore, task: CompactTask) -> CommitMessage | None:
    target, min_num, max_num = _options(table)
    picked = pick_append_files(task.files, target, min_num, max_num, task.full)
    if not picked:
        return None
    part = table.partition_codec().from_binary(task.partition)
    bucket_dir = table.path_factory.bucket_dir(part.spec, task.bucket)
    schema = table.schema.arrow_schema()
    reader = table.file_reader(for_rewrite=True)
    rows = pa.concat_tables([reader.read(f"{bucket_dir}/{f.file_name}", schema.names, schema, f)
                             for f in picked])
    writer = DataFileWriter(table.file_io, table.schema, bucket_dir, table.path_factory.new_data_file_name, target)
    after = writer.write_run(rows, level=0, min_sequence=picked[0].min_sequence_number,
                             file_source=FILE_SOURCE_COMPACT)
    return CommitMessage(task.partition, task.bucket, task.total_buckets, compact_before=list(picked),
                         compact_after=after)
