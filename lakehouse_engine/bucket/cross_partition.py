"""Cross-partition upsert (`bucket` = -1 and a primary key without every partition field).

A key may move between partitions, so a global index maps each primary key to its
(partition, bucket). It is bootstrapped from the table's latest snapshot when a writer starts,
kept as an Arrow IPC file on local disk (memory-mapped, so it costs page cache, not heap;
unlinked once mapped, so no writer leaves it behind), with
a small in-memory delta of the keys this writer placed. Exact key matching (Arrow's hash-based
`index_in`), no hash collisions. Rows are routed as Paimon's merge engines define it:
- deduplicate: a key arriving in another partition moves there (a delete goes to the old one);
- partial-update and aggregation: the row updates the key where it already lives;
- first-row: a key that already exists ignores the new row.
`cross-partition-upsert.index-ttl` forgets keys whose files are older than the TTL at bootstrap
and keys not touched for that long while writing (which, as Paimon warns, can duplicate them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.bucket.dynamic import DynamicBucketAssigner
from lakehouse_engine.errors import SnapshotNotExistError
from lakehouse_engine.format.binary_rows import serialize_rows
from lakehouse_engine.format.bucket_hash import hash_rows
from lakehouse_engine.format.float_order import canonical_nan_array
from lakehouse_engine.format.snapshot import CommitKind
from lakehouse_engine.mergetree.merge import DELETE, INSERT, UPDATE_AFTER
from lakehouse_engine.options import CROSS_PARTITION_UPSERT_INDEX_TTL, MERGE_ENGINE
from lakehouse_engine.partition import Partition, PartitionCodec
from lakehouse_engine.read.read_builder import ReadBuilder

if TYPE_CHECKING:
    from lakehouse_engine.format.snapshot import Snapshot
    from lakehouse_engine.store.file_store import FileStore


def _mapped(table: pa.Table) -> pa.Table:
    """`table` as an Arrow IPC file on local disk, memory-mapped (page cache, not heap).

    The file is unlinked as soon as it is mapped: the mapping keeps its pages until the index
    lets go of them, and nothing is left behind when the writer ends, fails or is killed after
    this point (each writer's index is the table's whole key set)."""
    directory = tempfile.mkdtemp(prefix="lakehouse-global-index-")
    try:
        path = os.path.join(directory, "bootstrap.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return pa.ipc.open_file(pa.memory_map(path)).read_all().combine_chunks()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class GlobalIndex:
    """primary key -> (partition, bucket) for a whole table."""

    def __init__(self, table: FileStore, snapshot: Snapshot | None):
        self.table = table
        schema = table.schema
        self.key_names = list(schema.primary_keys)
        self.key_types = schema.types_of(self.key_names)
        self.codec = PartitionCodec(schema)
        self.ttl_ms = table.options.get(CROSS_PARTITION_UPSERT_INDEX_TTL)
        self.partitions: list[Partition] = []
        self._partition_ids: dict[bytes, int] = {}
        self.bucket_rows: dict[bytes, dict[int, int]] = {}
        self._bootstrap(snapshot)
        self._delta_keys = self._empty_keys()
        self._delta_part = np.empty(0, np.int32)
        self._delta_bucket = np.empty(0, np.int32)
        self._delta_ts = np.empty(0, np.int64)

    # ---- keys -------------------------------------------------------------------------
    def key_array(self, table: pa.Table) -> pa.Array:
        """One comparable column per row: the key itself, or its BinaryRow for composite keys."""
        if len(self.key_names) == 1:
            col = table.column(self.key_names[0])
            # Arrow's hashing tells NaN payloads apart; Paimon's keys do not.
            return canonical_nan_array(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        return pa.array(serialize_rows([table.column(k) for k in self.key_names], self.key_types), pa.binary())

    def _empty_keys(self) -> pa.Array:
        t = self.key_types[0].to_arrow() if len(self.key_names) == 1 else pa.binary()
        return pa.array([], type=t)

    def partition_id(self, part: Partition) -> int:
        pid = self._partition_ids.get(part.binary)
        if pid is None:
            pid = len(self.partitions)
            self.partitions.append(part)
            self._partition_ids[part.binary] = pid
        return pid

    # ---- bootstrap ----------------------------------------------------------------------------
    def _bootstrap(self, snapshot: Snapshot | None) -> None:
        keys, parts, buckets, stamps = [], [], [], []
        if snapshot is not None:
            now = int(time.time() * 1000)
            # The table's own read path (as Paimon's IndexBootstrap): the keys as readers see them.
            builder = ReadBuilder(self.table).with_projection(self.key_names).with_snapshot(snapshot.id)
            read = builder.new_read()
            for split in builder.new_scan().plan().splits():
                born = max((f.creation_time_millis or now) for f in split.files)
                if self.ttl_ms is not None and now - born > self.ttl_ms:
                    continue
                rows = read.read_split(split)
                part = self.codec.from_binary(split.partition)
                counts = self.bucket_rows.setdefault(part.binary, {})
                counts[split.bucket] = counts.get(split.bucket, 0) + rows.num_rows
                keys.append(self.key_array(rows))
                parts.append(np.full(rows.num_rows, self.partition_id(part), np.int32))
                buckets.append(np.full(rows.num_rows, split.bucket, np.int32))
                stamps.append(np.full(rows.num_rows, now, np.int64))
        main = pa.table({
            "key": pa.concat_arrays(keys) if keys else self._empty_keys(),
            "part": np.concatenate(parts) if parts else np.empty(0, np.int32),
            "bucket": np.concatenate(buckets) if buckets else np.empty(0, np.int32),
            "ts": np.concatenate(stamps) if stamps else np.empty(0, np.int64),
        })
        self._main = _mapped(main)

    # ---- lookups and updates ---------------------------------------------------------------------
    def lookup(self, keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(partition id, bucket) per key; partition id -1 when the key is unknown (or expired)."""
        part = np.full(len(keys), -1, np.int32)
        bucket = np.full(len(keys), -1, np.int32)
        now = int(time.time() * 1000)
        for source_keys, source_part, source_bucket, source_ts in (
            (self._main.column("key").combine_chunks(), self._main.column("part").to_numpy(),
             self._main.column("bucket").to_numpy(), self._main.column("ts").to_numpy()),
            (self._delta_keys, self._delta_part, self._delta_bucket, self._delta_ts),
        ):
            if len(source_keys) == 0:
                continue
            pos = pc.index_in(keys, value_set=source_keys).to_numpy(zero_copy_only=False)
            hit = ~np.isnan(pos) if pos.dtype.kind == "f" else pos >= 0
            idx = pos[hit].astype(np.int64)
            fresh = np.ones(len(idx), bool) if self.ttl_ms is None else now - source_ts[idx] <= self.ttl_ms
            rows = np.flatnonzero(hit)[fresh]
            part[rows] = source_part[idx[fresh]]  # the delta, read second, overrides the bootstrap
            bucket[rows] = source_bucket[idx[fresh]]
        return part, bucket

    def update(self, keys: pa.Array, part: np.ndarray, bucket: np.ndarray) -> None:
        """Record where keys live now (part -1: deleted). Later entries override earlier ones."""
        if len(keys) == 0:
            return
        now = int(time.time() * 1000)
        if len(self._delta_keys):
            pos = pc.index_in(self._delta_keys, value_set=keys).to_numpy(zero_copy_only=False)
            stale = ~np.isnan(pos) if pos.dtype.kind == "f" else pos >= 0
            keep = pa.array(~stale)
            self._delta_keys = self._delta_keys.filter(keep)
            self._delta_part = self._delta_part[~stale]
            self._delta_bucket = self._delta_bucket[~stale]
            self._delta_ts = self._delta_ts[~stale]
        self._delta_keys = pa.concat_arrays([self._delta_keys, keys.cast(self._delta_keys.type)])
        self._delta_part = np.concatenate([self._delta_part, part.astype(np.int32)])
        self._delta_bucket = np.concatenate([self._delta_bucket, bucket.astype(np.int32)])
        self._delta_ts = np.concatenate([self._delta_ts, np.full(len(keys), now, np.int64)])


class CrossPartitionRouter:
    """Rewrites a batch for a cross-partition table: moves, deletes and buckets, per merge engine."""

    def __init__(self, table: FileStore, snapshot: Snapshot | None):
        self.table = table
        #: The snapshot the index was read from (0: none): keys other writers committed since may
        #: live elsewhere than the index says (the committer checks, `write.cross_partition_commit`).
        self.snapshot_id = snapshot.id if snapshot is not None else 0
        self.index = GlobalIndex(table, snapshot)
        self.merge_engine = table.options.require(MERGE_ENGINE)
        self.assigner = DynamicBucketAssigner(table, None, fresh=True)
        for binary, counts in self.index.bucket_rows.items():
            self.assigner.index(binary).bucket_rows.update(counts)
        schema = table.schema
        self.partition_keys = list(schema.partition_keys)
        self.bucket_key_names = schema.trimmed_primary_keys
        self.bucket_key_types = schema.types_of(self.bucket_key_names)

    def advance(self, commit_user: str) -> int:
        """The snapshot the index is good for, moved past the writer's own commits and compactions
        since (its index holds its own moves; compactions move no key), up to another writer's
        commit: the committer then reads only snapshots after it, once each over a stream of commits."""
        snapshots = self.table.snapshot_manager()
        latest = snapshots.latest_snapshot_id() or 0
        while self.snapshot_id < latest:
            try:
                s = snapshots.snapshot(self.snapshot_id + 1)
            except SnapshotNotExistError:
                break  # expired meanwhile: the committer decides
            if s.commit_user != commit_user and s.commit_kind != CommitKind.COMPACT:
                break
            self.snapshot_id = s.id
        return self.snapshot_id

    def route(self, rows: pa.Table, kinds: np.ndarray) -> tuple[pa.Table, np.ndarray, np.ndarray]:
        """(rows to write, their kinds, their buckets): the batch after applying the merge engine's
        cross-partition rule, including deletes sent to partitions keys left."""
        codec = self.index.codec
        part_of_row, partitions = codec.group_rows(rows)
        row_pid = np.array([self.index.partition_id(p) for p in partitions], np.int32)[part_of_row]
        keys = self.index.key_array(rows)
        key_codes = pc.dictionary_encode(keys).indices.to_numpy(zero_copy_only=False)
        n_keys = int(key_codes.max()) + 1 if len(key_codes) else 0
        positions = np.arange(len(key_codes))
        last_row = np.full(n_keys, -1, np.int64)
        np.maximum.at(last_row, key_codes, positions)
        first_row = np.full(n_keys, len(key_codes), np.int64)
        np.minimum.at(first_row, key_codes, positions)
        old_pid, old_bucket = self.index.lookup(keys.take(pa.array(first_row)))
        keep = np.ones(len(key_codes), bool)
        if self.merge_engine == "deduplicate":
            target = row_pid[last_row]                      # the key ends where its last row is
            keep = row_pid == target[key_codes]
        elif self.merge_engine == "first-row":
            target = np.where(old_pid >= 0, old_pid, row_pid[first_row])
            keep = (old_pid[key_codes] < 0) & (row_pid == target[key_codes])
        else:  # partial-update, aggregation: update where the key already lives
            target = np.where(old_pid >= 0, old_pid, row_pid[first_row])
        moved_rows = np.flatnonzero(keep & (row_pid != target[key_codes]))
        out = rows
        if len(moved_rows):
            out = self._with_partition(rows, moved_rows, target[key_codes[moved_rows]])
        out, out_kinds, out_codes = out.filter(pa.array(keep)), kinds[keep], key_codes[keep]
        # Buckets: the old bucket where the key stays in its partition, else a dynamic assignment.
        buckets = np.empty(out.num_rows, np.int64)
        stays = (old_pid >= 0) & (old_pid == target)
        row_stays = stays[out_codes]
        buckets[row_stays] = old_bucket[out_codes[row_stays]]
        new_rows = np.flatnonzero(~row_stays)
        if len(new_rows):
            hashes = hash_rows([out.column(k).take(pa.array(new_rows)) for k in self.bucket_key_names],
                               self.bucket_key_types)
            target_of_new = target[out_codes[new_rows]]
            for pid in np.unique(target_of_new):
                sel = target_of_new == pid
                buckets[new_rows[sel]] = self.assigner.assign(self.index.partitions[int(pid)], hashes[sel])
        # Deletes for keys that left a partition (deduplicate only).
        leaving = np.flatnonzero((old_pid >= 0) & (old_pid != target)) if self.merge_engine == "deduplicate" else np.empty(0, np.int64)
        key_bucket = np.full(n_keys, -1, np.int64)
        key_bucket[out_codes] = buckets
        if len(leaving):
            tombstones = self._with_partition(rows.take(pa.array(last_row[leaving])), np.arange(len(leaving)),
                                              old_pid[leaving])
            out = pa.concat_tables([tombstones, out])
            out_kinds = np.concatenate([np.full(len(leaving), DELETE, np.int8), out_kinds])
            buckets = np.concatenate([old_bucket[leaving].astype(np.int64), buckets])
        # The index follows: deleted keys are forgotten, others live at their target.
        final_kind = kinds[last_row]
        gone = (final_kind != INSERT) & (final_kind != UPDATE_AFTER) & (self.merge_engine == "deduplicate")
        placed = key_bucket >= 0
        self.index.update(keys.take(pa.array(first_row[placed])), np.where(gone[placed], -1, target[placed]),
                          key_bucket[placed])
        return out, out_kinds, buckets

    def _with_partition(self, rows: pa.Table, positions: np.ndarray, pids: np.ndarray) -> pa.Table:
        """Rows with the partition fields at `positions` (ascending) set to those of partitions `pids`."""
        mask = np.zeros(rows.num_rows, bool)
        mask[positions] = True
        columns = []
        for i, name in enumerate(rows.column_names):
            col = rows.column(i)
            if name in self.partition_keys:
                k = self.partition_keys.index(name)
                per_partition = pa.array([p.values[k] for p in self.index.partitions], type=col.type)
                replacement = per_partition.take(pa.array(pids.astype(np.int64)))
                col = pc.replace_with_mask(col.combine_chunks(), pa.array(mask), replacement)
            columns.append(col)
        return pa.Table.from_arrays(columns, schema=rows.schema)
