"""What a table holds, from its manifests only: the public calls behind `FileStoreTable`'s
`index_stats`, `files_added` and `committed_snapshots` (`bucket_stats` is in `compact.stats`).

Each answers with a pyarrow table (or a list of ids) whose partitions are Paimon's partition
path strings (`dt=2026-11-21`), as `bucket_stats` names them; no data file is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_engine.format.manifest_entries import FileKind

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable

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


def index_stats(table: FileStoreTable, snapshot_id: int | None = None) -> pa.Table:
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


def files_added(table: FileStoreTable, snapshot_ids: list[int]) -> pa.Table:
    """The data files these snapshots added (the ADD entries of their delta manifests)."""
    io = table.manifest_io()
    codec = table.partition_codec()
    names: dict[bytes, str] = {}
    rows: dict[str, list[object]] = {f.name: [] for f in FILES_ADDED_SCHEMA}
    for sid in snapshot_ids:
        delta = io.read_entries(io.read_manifest_list(table.snapshot(sid).delta_manifest_list))
        for e in delta:
            if e.kind != FileKind.ADD:
                continue
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


def committed_snapshots(table: FileStoreTable, commit_user: str, commit_identifier: int) -> list[int]:
    """The snapshots a commit of (`commit_user`, `commit_identifier`) landed as, oldest first (its
    data snapshot, then its compaction); empty when it never landed or its snapshots expired."""
    from lakehouse_engine.write.commit_retry import snapshots_of_commit

    landed = snapshots_of_commit(table, commit_user, commit_identifier, None)
    return sorted(landed.by_kind.values())
