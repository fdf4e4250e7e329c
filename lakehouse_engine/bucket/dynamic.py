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
    from lakehouse_engine.store.file_store import FileStore

HASH_INDEX = "HASH"


def first_occurrences(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct values of `hashes` (int32) in ascending uint32 order, the position where each
    first occurs, and for each position the index of its value among the distinct ones.

    One sort of (uint32 hash << 32 | position) groups equal hashes with their positions ascending,
    where an argsort (stable, for first occurrences) would cost ten times as much.
    """
    n = len(hashes)
    if n >= 1 << 32:
        raise LakehouseError(f"a batch of {n} keys is too large to assign at once")
    packed = (hashes.view(np.uint32).astype(np.uint64) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    packed.sort()
    sorted_hashes = (packed >> np.uint64(32)).astype(np.uint32).view(np.int32)
    positions = (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)
    starts = np.empty(n, dtype=bool)
    starts[:1] = True
    np.not_equal(sorted_hashes[1:], sorted_hashes[:-1], out=starts[1:])
    group = np.empty(n, dtype=np.int64)
    group[positions] = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    return sorted_hashes[first], positions[first], group


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

    def __init__(self, table: FileStore, snapshot: Snapshot | None, num_assigners: int = 1,
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
        found = idx.lookup(hashes) if len(idx) else np.full(len(hashes), -1, dtype=np.int32)
        new = found < 0
        all_new = bool(new.all())
        if not all_new:
            self._count_updated(partition.binary, hashes[~new], found[~new])
        if new.any():
            new_hashes = hashes if all_new else hashes[new]
            in_order = np.sort(new_hashes)
            if (in_order[1:] != in_order[:-1]).all():
                # Each new key occurs once: they arrive in the batch's order.
                placed = self._place(partition, idx, len(new_hashes))
                idx.add(new_hashes, placed)
                new_buckets = placed
            else:
                keys, first, group = first_occurrences(new_hashes)
                arrival = group[np.sort(first)]  # the distinct new keys in order of first occurrence
                placed = self._place(partition, idx, len(arrival))
                idx.add(keys[arrival], placed)
                key_buckets = np.empty(len(keys), dtype=np.int16)
                key_buckets[arrival] = placed
                new_buckets = key_buckets[group]
            per_bucket = np.bincount(placed.astype(np.int64))
            touched = np.flatnonzero(per_bucket).tolist()
            self._touched.setdefault(partition.binary, set()).update(touched)
            for bucket in touched:
                key = (partition.binary, bucket)
                self.inserted[key] = self.inserted.get(key, 0) + int(per_bucket[bucket])
            if all_new:
                return new_buckets.astype(np.int64)
            found[new] = new_buckets
        return found.astype(np.int64)

    def _count_updated(self, partition: bytes, hashes: np.ndarray, buckets: np.ndarray) -> None:
        """Count the distinct indexed keys a batch updates, per bucket (a hash has one bucket,
        so distinct (bucket, hash) pairs are distinct keys)."""
        pairs = np.unique((buckets.astype(np.int64) << 32) | hashes.view(np.uint32).astype(np.int64))
        per_bucket = np.bincount(pairs >> 32)
        for bucket in np.flatnonzero(per_bucket).tolist():
            key = (partition, bucket)
            self.updated[key] = self.updated.get(key, 0) + int(per_bucket[bucket])

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
            # Each target takes its capacity in turn; the last one taken only what is left.
            taken_per_target = np.diff(np.minimum(np.cumsum([0, *capacity]), filled))
            placed[:filled] = np.repeat(np.asarray(targets, dtype=np.int16), taken_per_target)
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
            for bucket, hashes in self._indexes[partition].hashes_by_bucket(buckets).items():
                name = paths.new_index_file_name()
                data = encode_hashes(hashes)
                self.table.file_io.write_bytes(f"{paths.index_dir}/{name}", data)
                entry = IndexManifestEntry(FileKind.ADD, partition, bucket, HASH_INDEX, name, len(data), len(hashes))
                replaced = self._base_entries[partition].get(bucket)
                changes[(partition, bucket)] = IndexChange(entry, replaced)
                self._base_entries[partition][bucket] = entry
        self._touched = {}
        return changes
