"""What a table holds, from its manifests only: the public calls behind `FileStoreTable`'s
`bucket_stats`, `index_stats`, `files_added` and `committed_snapshots`.

Each answers with a pyarrow table (or a list of ids) whose partitions are Paimon's partition
path strings (`dt=2026-11-21`), as `bucket_stats` names them; no data file is opened.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_engine.format.manifest_entries import DataFileMeta, FileKind
from lakehouse_engine.mergetree.compact.levels import Levels

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

INDEX_STATS_SCHEMA = pa.schema([
    pa.field("partition", pa.string()),
    pa.field("bucket", pa.int32()),
    pa.field("index_type", pa.string()),      # HASH (dynamic bucket keys), DELETION_VECTORS, ...
    pa.field("file_name", pa.string()),
    pa.field("row_count", pa.int64()),        # HASH: the keys the bucket holds
    pa.field("file_size", pa.int64()),
])

FILES_ADDED_SCHEMA = pa.schema([
    pa.field("snapshot_id", pa.int64()),
    pa.field("partition", pa.string()),
    pa.field("bucket", pa.int32()),
    pa.field("file_name", pa.string()),
    pa.field("level", pa.int32()),
    pa.field("row_count", pa.int64()),
    pa.field("file_size", pa.int64()),
])

BUCKET_STATS_SCHEMA = pa.schema([
    pa.field("partition", pa.string()),
    pa.field("bucket", pa.int32()),
    pa.field("total_buckets", pa.int32()),
    pa.field("record_count", pa.int64()),
    pa.field("file_count", pa.int64()),
    pa.field("sorted_runs", pa.int32()),
    pa.field("max_level", pa.int32()),
    pa.field("size_bytes", pa.int64()),
])


def bucket_stats(table: FileStore, snapshot_id: int | None = None) -> pa.Table:
    """One row per (partition, bucket): file row counts (unmerged), files, sorted runs, levels, bytes.

    Only manifests are read; no data file is opened.
    """
    snapshot = table.resolve_snapshot(snapshot_id)
    if snapshot is None:
        return BUCKET_STATS_SCHEMA.empty_table()
    groups: dict[tuple[bytes, int], list[DataFileMeta]] = defaultdict(list)
    totals: dict[tuple[bytes, int], int] = {}
    for e in table.manifest_io().live_entries(snapshot):
        groups[(e.partition, e.bucket)].append(e.file)
        totals[(e.partition, e.bucket)] = e.total_buckets
    codec = table.partition_codec()
    rows: dict[str, list[object]] = {f.name: [] for f in BUCKET_STATS_SCHEMA}
    num_levels = table.options.num_levels
    for (partition, bucket), files in sorted(groups.items(), key=lambda kv: (codec.from_binary(kv[0][0]).path_string(), kv[0][1])):
        levels = Levels(files, num_levels)
        rows["partition"].append(codec.from_binary(partition).path_string())
        rows["bucket"].append(bucket)
        rows["total_buckets"].append(totals[(partition, bucket)])
        rows["record_count"].append(sum(f.row_count for f in files))
        rows["file_count"].append(len(files))
        rows["sorted_runs"].append(levels.number_of_sorted_runs() if table.schema.has_primary_key else len(files))
        rows["max_level"].append(max(f.level for f in files))
        rows["size_bytes"].append(sum(f.file_size for f in files))
    return pa.table(rows, schema=BUCKET_STATS_SCHEMA)



def index_stats(table: FileStore, snapshot_id: int | None = None) -> pa.Table:
    """One row per live index file of the snapshot (the latest when None), by partition and bucket."""
    snapshot = table.resolve_snapshot(snapshot_id)
    if snapshot is None or not snapshot.index_manifest:
        return INDEX_STATS_SCHEMA.empty_table()
    codec = table.partition_codec()
    entries = [e for e in table.manifest_io().read_index_manifest(snapshot.index_manifest)
               if e.kind == FileKind.ADD]
    names = {p: codec.from_binary(p).path_string() for p in {e.partition for e in entries}}
    entries.sort(key=lambda e: (names[e.partition], e.bucket, e.index_type, e.file_name))
    return pa.table({
        "partition": [names[e.partition] for e in entries],
        "bucket": [e.bucket for e in entries],
        "index_type": [e.index_type for e in entries],
        "file_name": [e.file_name for e in entries],
        "row_count": [e.row_count for e in entries],
        "file_size": [e.file_size for e in entries],
    }, schema=INDEX_STATS_SCHEMA)


def files_added(table: FileStore, snapshot_ids: list[int]) -> pa.Table:
    """The data files these snapshots added (the ADD entries of their delta manifests)."""
    io = table.manifest_io()
    codec = table.partition_codec()
    names: dict[bytes, str] = {}
    rows: dict[str, list[object]] = {f.name: [] for f in FILES_ADDED_SCHEMA}
    for sid in snapshot_ids:
        for e in io.added_entries(table.snapshot(sid)):
            if e.partition not in names:
                names[e.partition] = codec.from_binary(e.partition).path_string()
            rows["snapshot_id"].append(sid)
            rows["partition"].append(names[e.partition])
            rows["bucket"].append(e.bucket)
            rows["file_name"].append(e.file.file_name)
            rows["level"].append(e.file.level)
            rows["row_count"].append(e.file.row_count)
            rows["file_size"].append(e.file.file_size)
    return pa.table(rows, schema=FILES_ADDED_SCHEMA)


def committed_snapshots(table: FileStore, commit_user: str, commit_identifier: int) -> list[int]:
    """The snapshots a commit of (`commit_user`, `commit_identifier`) landed as, oldest first (its
    data snapshot, then its compaction); empty when it never landed or its snapshots expired."""
    from lakehouse_engine.write.commit_retry import snapshots_of_commit

    landed = snapshots_of_commit(table, commit_user, commit_identifier, None)
    return sorted(landed.by_kind.values())
