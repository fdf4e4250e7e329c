"""Per-bucket statistics from manifests only: what the pipelines' checks and sensor read."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.compact.levels import Levels

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable

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


def bucket_stats(table: FileStoreTable, snapshot_id: int | None = None) -> pa.Table:
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
