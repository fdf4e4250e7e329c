"""Dynamic bucket assignment (`bucket` = -1): Paimon's hash-index bucket assigner, vectorised.

For each key hash of a batch, in arrival order: a hash already indexed keeps its bucket;
otherwise it goes to the first of this assigner's buckets holding fewer than
`dynamic-bucket.target-row-num` keys; otherwise to a new bucket whose id belongs to this
assigner (`bucket % num_assigners == assigner_id`). With `dynamic-bucket.max-buckets` reached,
new keys spread over the assigner's existing buckets, as in Paimon. With n assigners, assigner i
takes the keys with `abs(hash % n) == i`, so n processes can assign at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lakehouse_engine.bucket.hash_index import (
    MAX_DYNAMIC_BUCKETS,
    PartitionHashIndex,
    encode_hashes,
)
from lakehouse_engine.bucket.index_check import (
    check_index_covers_data,
    data_files_by_partition,
    read_hash_index_file,
)
from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.format.bucket_hash import bucket_of
from lakehouse_engine.format.manifest_entries import DataFileMeta, FileKind, IndexManifestEntry
from lakehouse_engine.options import DYNAMIC_BUCKET_MAX_BUCKETS, DYNAMIC_BUCKET_TARGET_ROW_NUM

if TYPE_CHECKING:
    from lakehouse_engine.format.snapshot import Snapshot
    from lakehouse_engine.partition import Partition
    from lakehouse_engine.table import FileStoreTable

HASH_INDEX = "HASH"


def assigner_of(hashes: np.ndarray, num_assigners: int) -> np.ndarray:
    """Which of n assigners owns each key hash: `abs(hash % n)` with Java's remainder (int64),
    the same arithmetic as a fixed bucket of n buckets."""
    return bucket_of(hashes, num_assigners).astype(np.int64)


@dataclass
class IndexChange:
    """The new HASH index file of one (partition, bucket), and the one it replaces."""

    entry: IndexManifestEntry
    replaced: IndexManifestEntry | None


class DynamicBucketAssigner:
    """Assigns buckets for one writer (one assigner of `num_assigners`) of a dynamic-bucket table."""

    def __init__(self, table: FileStoreTable, snapshot: Snapshot | None, num_assigners: int = 1,
                 assigner_id: int = 0, fresh: bool = False):
        if num_assigners < 1 or not 0 <= assigner_id < num_assigners:
            raise LakehouseError(f"assigner {assigner_id} of {num_assigners} is not a valid assigner")
        self.table = table
        self.snapshot = snapshot
        self.num_assigners = num_assigners
        self.assigner_id = assigner_id
        self.fresh = fresh  # an overwrite starts from empty indexes
        opts = table.options
        self.target = opts.require(DYNAMIC_BUCKET_TARGET_ROW_NUM)
        max_buckets = opts.require(DYNAMIC_BUCKET_MAX_BUCKETS)
        self.max_buckets = max_buckets if max_buckets > 0 else -1
        self._indexes: dict[bytes, PartitionHashIndex] = {}
        self._aligned: dict[bytes, bool] = {}
        self._base_entries: dict[bytes, dict[int, IndexManifestEntry]] = {}
        self._touched: dict[bytes, set[int]] = {}
        self._all_entries: list[IndexManifestEntry] | None = None
        self._data_files: dict[bytes, dict[int, list[DataFileMeta]]] | None = None
        self.inserted: dict[tuple[bytes, int], int] = {}
        self.updated: dict[tuple[bytes, int], int] = {}

    # ---- restore ---------------------------------------------------------------------
    def _snapshot_entries(self) -> list[IndexManifestEntry]:
        if self._all_entries is None:
            name = self.snapshot.index_manifest if self.snapshot is not None else None
            self._all_entries = self.table.manifest_io().read_index_manifest(name) if name else []
        return self._all_entries

    def index(self, partition: bytes) -> PartitionHashIndex:
        """The partition's index, restored from the snapshot's HASH index files on first use."""
        idx = self._indexes.get(partition)
        if idx is None:
            entries = {} if self.fresh else {
                e.bucket: e for e in self._snapshot_entries()
                if e.partition == partition and e.index_type == HASH_INDEX and e.kind == FileKind.ADD}
            hashes, buckets = [], []
            index_manifest = (self.snapshot.index_manifest if self.snapshot else None) or ""
            aligned = True
            for bucket, e in entries.items():
                h = read_hash_index_file(self.table, e, index_manifest)
                hashes.append(h)
                buckets.append(np.full(len(h), bucket, dtype=np.int16))
                if self.num_assigners > 1 and aligned:
                    aligned = bool((assigner_of(h, self.num_assigners) == bucket % self.num_assigners).all())
            self._aligned[partition] = aligned
            idx = PartitionHashIndex(np.concatenate(hashes) if hashes else None,
                                     np.concatenate(buckets) if buckets else None)
            if not self.fresh and self.snapshot is not None:
                if self._data_files is None:  # once per assigner, not once per partition
                    self._data_files = data_files_by_partition(self.table, self.snapshot)
                check_index_covers_data(self.table, self.snapshot, partition, entries, idx,
                                        self._data_files.get(partition, {}))
            self._indexes[partition] = idx
            self._base_entries[partition] = entries
        return idx

    def aligned(self, partition: bytes) -> bool:
        """Whether the partition's index (as restored) agrees with this assigner count: every key
        hash h sits in a bucket b with `abs(h % n) == b % n`. Then assigner i only ever touches
        buckets `b % n == i`, and may compact them as their sole writer."""
        self.index(partition)
        return self._aligned[partition]

    def base_index_files(self, partition: bytes) -> list[str]:
        """Names of the partition's index files in the snapshot this assigner started from."""
        self.index(partition)
        return sorted(e.file_name for e in self._base_entries[partition].values())

    # ---- assignment --------------------------------------------------------------------
    def _mine(self, bucket: int) -> bool:
        return bucket % self.num_assigners == self.assigner_id

    def assign(self, partition: Partition, hashes: np.ndarray) -> np.ndarray:
        """The bucket of each key hash (all owned by this assigner), indexing new ones."""
        hashes = np.asarray(hashes, dtype=np.int32)
        if self.num_assigners > 1:
            foreign = assigner_of(hashes, self.num_assigners) != self.assigner_id
            if foreign.any():
                raise LakehouseError(
                    f"table {self.table.name}: assigner {self.assigner_id} of {self.num_assigners} got keys "
                    f"of another assigner; route keys by abs(hash % {self.num_assigners})")
        idx = self.index(partition.binary)
        found = idx.lookup(hashes)
        new = found < 0
        if new.any():
            new_hashes = hashes[new]
            uniq, first = np.unique(new_hashes, return_index=True)
            arrival = uniq[np.argsort(first, kind="stable")]
            idx.add(arrival, self._place(partition, idx, len(arrival)))
            self._touched.setdefault(partition.binary, set()).update(
                int(b) for b in np.unique(idx.lookup(arrival)))
            found = idx.lookup(hashes)
        self._count(partition.binary, hashes, new, found)
        return found.astype(np.int64)

    def _count(self, partition: bytes, hashes: np.ndarray, new: np.ndarray, buckets: np.ndarray) -> None:
        for kind, mask in ((self.inserted, new), (self.updated, ~new)):
            if not mask.any():
                continue
            uniq_hashes, first = np.unique(hashes[mask], return_index=True)
            per_bucket = np.bincount(buckets[mask][first].astype(np.int64))
            for bucket in np.flatnonzero(per_bucket):
                key = (partition, int(bucket))
                kind[key] = kind.get(key, 0) + int(per_bucket[bucket])

    def _place(self, partition: Partition, idx: PartitionHashIndex, n: int) -> np.ndarray:
        """Buckets for n new keys in arrival order: fill non-full buckets, then open new ones."""
        rows = idx.bucket_rows
        targets: list[int] = []
        capacity: list[int] = []
        for bucket in sorted(b for b in rows if self._mine(b) and rows[b] < self.target):
            targets.append(bucket)
            capacity.append(self.target - rows[bucket])
        limit = MAX_DYNAMIC_BUCKETS if self.max_buckets == -1 else min(self.max_buckets, MAX_DYNAMIC_BUCKETS)
        taken = set(rows)
        candidate = self.assigner_id
        while sum(capacity) < n:
            while candidate in taken:
                candidate += self.num_assigners
            if candidate >= limit:
                break
            targets.append(candidate)
            capacity.append(self.target)
            taken.add(candidate)
        placed = np.empty(n, dtype=np.int16)
        filled = min(n, sum(capacity))
        if filled:
            bounds = np.cumsum(capacity)
            placed[:filled] = np.asarray(targets, dtype=np.int16)[np.searchsorted(bounds, np.arange(filled), side="right")]
        if filled < n:
            if self.max_buckets == -1:
                raise LakehouseError(
                    f"table {self.table.name}, partition {partition.path_string() or '(none)'}: no dynamic "
                    f"bucket id is left below {MAX_DYNAMIC_BUCKETS} for assigner {self.assigner_id}; "
                    f"increase 'dynamic-bucket.target-row-num' ({self.target})")
            mine = [b for b in sorted(taken) if self._mine(b)]
            if not mine:
                raise LakehouseError(
                    f"table {self.table.name}: 'dynamic-bucket.max-buckets' ({self.max_buckets}) leaves no "
                    f"bucket for assigner {self.assigner_id} of {self.num_assigners}; raise it or use "
                    f"fewer assigners")
            # As Paimon: past max-buckets, new keys spread over the existing buckets.
            rng = np.random.default_rng(int(partition.binary.__hash__()) & 0xFFFF)
            placed[filled:] = rng.choice(np.asarray(mine, dtype=np.int16), size=n - filled)
        return placed

    # ---- index files -------------------------------------------------------------------------
    def prepare_index_files(self) -> dict[tuple[bytes, int], IndexChange]:
        """Write a new HASH index file for every bucket that gained keys since the last call."""
        changes: dict[tuple[bytes, int], IndexChange] = {}
        paths = self.table.path_factory
        for partition, buckets in self._touched.items():
            idx = self._indexes[partition]
            for bucket in sorted(buckets):
                hashes = idx.hashes_of(bucket)
                name = paths.new_index_file_name()
                data = encode_hashes(hashes)
                self.table.file_io.write_bytes(f"{paths.index_dir}/{name}", data)
                entry = IndexManifestEntry(FileKind.ADD, partition, bucket, HASH_INDEX, name, len(data), len(hashes))
                replaced = self._base_entries[partition].get(bucket)
                changes[(partition, bucket)] = IndexChange(entry, replaced)
                self._base_entries[partition][bucket] = entry
        self._touched = {}
        return changes
