"""TableScan: from a snapshot's manifests to the live files that may match, packed into splits."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import (
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
    merge_entries,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.interval_partition import interval_partition
from lakehouse_engine.options import SOURCE_SPLIT_OPEN_FILE_COST, SOURCE_SPLIT_TARGET_SIZE
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.split import DataSplit, ordered_pack

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable


class Plan:
    """The result of a scan: its splits (pypaimon's `Plan`)."""

    def __init__(self, splits: list[DataSplit], snapshot: Snapshot | None):
        self._splits = splits
        self.snapshot = snapshot

    def splits(self) -> list[DataSplit]:
        return self._splits


class TableScan:
    """Plans the splits of one snapshot (latest unless the table's scan options or a call pick one)."""

    def __init__(self, table: FileStoreTable, predicate: Predicate | None = None,
                 snapshot_id: int | None = None, tag: str | None = None):
        self.table = table
        self.predicate = predicate
        self.snapshot_id = snapshot_id
        self.tag = tag
        schema = table.schema
        self.partition_keys = list(schema.partition_keys)
        self.key_names = schema.trimmed_primary_keys if schema.has_primary_key else []
        self.key_types = schema.types_of(self.key_names)
        opts = schema.core_options
        self.target_split_size = opts.require(SOURCE_SPLIT_TARGET_SIZE)
        self.open_file_cost = opts.require(SOURCE_SPLIT_OPEN_FILE_COST)

    def plan(self) -> Plan:
        snapshot = self.table.resolve_snapshot(self.snapshot_id, self.tag)
        if snapshot is None:
            return Plan([], None)
        entries = self.live_entries(snapshot)
        groups: dict[tuple[bytes, int], list[ManifestEntry]] = defaultdict(list)
        for e in entries:
            groups[(e.partition, e.bucket)].append(e)
        splits: list[DataSplit] = []
        codec = self.table.partition_codec()
        for (partition, bucket), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            part = codec.from_binary(partition)
            bucket_path = self.table.path_factory.bucket_dir(part.spec, bucket)
            splits.extend(self._bucket_splits(snapshot.id, part.binary, part.values, bucket,
                                              group[0].total_buckets, bucket_path,
                                              [e.file for e in group]))
        return Plan(splits, snapshot)

    # ---- pruning ---------------------------------------------------------------------
    def live_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """Live data files of `snapshot` that survive partition and key-range pruning."""
        mio = self.table.manifest_io()
        metas = [m for m in mio.data_manifests(snapshot) if self._manifest_may_match(m)]
        merged = merge_entries(mio.read_entries(metas))
        codec = self.table.partition_codec()
        out = []
        partition_ok: dict[bytes, bool] = {}
        for e in merged:
            if e.kind != FileKind.ADD or e.bucket == POSTPONE_BUCKET:
                continue
            if self.predicate is not None:
                ok = partition_ok.get(e.partition)
                if ok is None:
                    values = codec.from_binary(e.partition).values
                    ranges = {k: (v, v) for k, v in zip(self.partition_keys, values, strict=True)}
                    ok = self.predicate.may_match(ranges)
                    partition_ok[e.partition] = ok
                if not ok or not self._file_keys_may_match(e):
                    continue
            out.append(e)
        return out

    def _manifest_may_match(self, meta: ManifestFileMeta) -> bool:
        if self.predicate is None or not self.partition_keys:
            return True
        stats = meta.partition_stats
        try:
            types = self.table.schema.types_of(self.partition_keys)
            lo = deserialize_row(stats.min_values, types)
            hi = deserialize_row(stats.max_values, types)
        except Exception:  # stats of another layout: no pruning, never a wrong answer
            return True
        nulls = stats.null_counts or []
        ranges = {}
        for i, k in enumerate(self.partition_keys):
            if i < len(nulls) and nulls[i]:
                continue  # a null partition value is outside [lo, hi]; do not prune on this field
            ranges[k] = (lo[i], hi[i])
        return self.predicate.may_match(ranges)

    def _file_keys_may_match(self, e: ManifestEntry) -> bool:
        if not self.key_names or self.predicate is None:
            return True
        if not (self.predicate.fields() & set(self.key_names)):
            return True
        try:
            lo = deserialize_row(e.file.key_stats.min_values, self.key_types)
            hi = deserialize_row(e.file.key_stats.max_values, self.key_types)
        except Exception:
            return True
        if len(lo) != len(self.key_names):
            return True
        return self.predicate.may_match(dict(zip(self.key_names, zip(lo, hi, strict=True), strict=True)))

    # ---- split generation -------------------------------------------------------------
    def _key(self, binary: bytes) -> tuple[Any, ...]:
        return comparable_key(deserialize_row(binary, self.key_types))

    def _bucket_splits(self, snapshot_id: int, partition: bytes, values: tuple[Any, ...], bucket: int,
                       total_buckets: int, bucket_path: str, files: list[Any]) -> list[DataSplit]:
        if self.key_names:
            sections = interval_partition(files, self._key)
        else:
            sections = [[f] for f in sorted(files, key=lambda f: f.min_sequence_number)]
        weights = [sum(max(f.file_size, self.open_file_cost) for f in s) for s in sections]
        splits = []
        for bin_ in ordered_pack(weights, self.target_split_size):
            chosen = [sections[i] for i in bin_]
            raw = all(len(s) == 1 and s[0].delete_row_count == 0 for s in chosen)
            splits.append(DataSplit(snapshot_id, partition, values, bucket, total_buckets, bucket_path,
                                    chosen, raw or not self.key_names))
        return splits
