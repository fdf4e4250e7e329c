"""The hash index of one partition: key hash -> bucket, in sorted NumPy arrays (6 bytes a key).

Paimon's dynamic-bucket HASH index files list the int32 key hashes a bucket owns (4-byte
big-endian each). In memory a partition is an open-addressing table
over NumPy arrays (see PartitionHashIndex).
"""

from __future__ import annotations

import numpy as np

# Bucket ids of dynamic buckets stay below Java's Short.MAX_VALUE + 1, as in Paimon.
MAX_DYNAMIC_BUCKETS = 32768


def encode_hashes(hashes: np.ndarray) -> bytes:
    """A HASH index file's bytes: each int32 hash big-endian."""
    return np.asarray(hashes, dtype=">i4").tobytes()


def decode_hashes(data: bytes, file_name: str) -> np.ndarray:
    from lakehouse_engine.errors import CorruptFileError

    if len(data) % 4:
        raise CorruptFileError(f"hash index file {file_name} is {len(data)} bytes, not a multiple of 4")
    return np.frombuffer(data, dtype=">i4").astype(np.int32)


class PartitionHashIndex:
    """hash -> bucket for one partition: a NumPy open-addressing table, probed for whole batches.

    Keys are the int32 hashes themselves (already well mixed by MurmurHash3); a slot is the
    hash scaled onto the table size by multiply-shift, collisions probe linearly. The table
    grows to keep its load between 0.5 and 0.75, so memory is 8 to 12 bytes per key
    (int32 hash + int16 bucket per slot), and a lookup costs about one cache miss.
    """

    _MAX_LOAD = 0.75
    _GROW_TO_LOAD = 0.5

    def __init__(self, hashes: np.ndarray | None = None, buckets: np.ndarray | None = None):
        self._size = 0
        self._alloc(1024)
        self.bucket_rows: dict[int, int] = {}
        if hashes is not None and len(hashes):
            self.add(np.asarray(hashes, dtype=np.int32), np.asarray(buckets, dtype=np.int16))

    def _alloc(self, capacity: int) -> None:
        self._capacity = capacity
        self._keys = np.zeros(capacity, dtype=np.int32)
        self._buckets = np.full(capacity, -1, dtype=np.int16)

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        return self._keys.nbytes + self._buckets.nbytes

    def _slots(self, hashes: np.ndarray) -> np.ndarray:
        return ((hashes.astype(np.uint32).astype(np.uint64) * np.uint64(self._capacity)) >> np.uint64(32)).astype(np.int64)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The bucket of each hash, or -1 where the hash is not indexed."""
        hashes = np.asarray(hashes, dtype=np.int32)
        out = np.full(len(hashes), -1, dtype=np.int32)
        active = np.arange(len(hashes))
        slots = self._slots(hashes)
        wanted = hashes
        while len(active):
            b = self._buckets[slots]
            occupied = b >= 0
            hit = occupied & (self._keys[slots] == wanted)
            out[active[hit]] = b[hit]
            more = occupied & ~hit
            active, wanted = active[more], wanted[more]
            slots = slots[more] + 1
            slots[slots == self._capacity] = 0
        return out

    def add(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        """Index new (not yet indexed, distinct) hashes."""
        hashes = np.asarray(hashes, dtype=np.int32)
        buckets = np.asarray(buckets, dtype=np.int16)
        if len(hashes) == 0:
            return
        if self._size + len(hashes) > self._capacity * self._MAX_LOAD:
            self._grow(self._size + len(hashes))
        self._insert(hashes, buckets)
        self._size += len(hashes)
        values, counts = np.unique(buckets, return_counts=True)
        for bucket, count in zip(values.tolist(), counts.tolist(), strict=True):
            self.bucket_rows[bucket] = self.bucket_rows.get(bucket, 0) + count

    def _insert(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        slots = self._slots(hashes)
        pending = np.arange(len(hashes))
        while len(pending):
            free = self._buckets[slots] < 0
            # Of the keys that found a free slot, the first per slot claims it.
            cand = np.flatnonzero(free)
            claimed = np.zeros(len(pending), dtype=bool)
            if len(cand):
                _, first = np.unique(slots[cand], return_index=True)
                winners = cand[first]
                self._keys[slots[winners]] = hashes[pending[winners]]
                self._buckets[slots[winners]] = buckets[pending[winners]]
                claimed[winners] = True
            # Losers retry the same slot next round (it may be theirs to probe past); others move on.
            moved = ~claimed
            slots = np.where(free[moved], slots[moved], slots[moved] + 1)
            slots[slots == self._capacity] = 0
            pending = pending[moved]

    def _grow(self, needed: int) -> None:
        occupied = self._buckets >= 0
        keys, buckets = self._keys[occupied], self._buckets[occupied]
        self._alloc(max(1024, int(needed / self._GROW_TO_LOAD) + 1))
        self._insert(keys, buckets)

    def hashes_of(self, bucket: int) -> np.ndarray:
        """Every hash a bucket owns (what its HASH index file lists)."""
        return self._keys[self._buckets == bucket]
