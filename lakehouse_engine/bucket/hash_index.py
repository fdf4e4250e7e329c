"""The hash index of one partition: key hash -> bucket, in a NumPy open-addressing table.

Paimon's dynamic-bucket HASH index files list the int32 key hashes a bucket owns (4-byte
big-endian each). In memory a partition is an open-addressing table
over NumPy arrays (see PartitionHashIndex).
"""

from __future__ import annotations

from collections.abc import Iterable

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
    #: Probing rounds an insert makes before it lays the table out anew instead: a batch whose
    #: home slots fall in a long run of taken slots (keys arriving in hash order, as index files
    #: list them) advances one slot a round, quadratic in the run's length.
    _MAX_PROBE_ROUNDS = 64

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
        """Index new hashes: distinct, and none of them indexed yet."""
        hashes = np.asarray(hashes, dtype=np.int32)
        buckets = np.asarray(buckets, dtype=np.int16)
        if len(hashes) == 0:
            return
        if self._size + len(hashes) > self._capacity * self._MAX_LOAD:
            self._rebuild(hashes, buckets)
        else:
            rest = self._insert(hashes, buckets)
            if len(rest):
                self._rebuild(hashes[rest], buckets[rest])
        self._size += len(hashes)
        counts = np.bincount(buckets.astype(np.int64))
        for bucket in np.flatnonzero(counts).tolist():
            self.bucket_rows[bucket] = self.bucket_rows.get(bucket, 0) + int(counts[bucket])

    def _insert(self, hashes: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        """Insert distinct keys not in the table yet, in probing rounds over the whole batch;
        returns the positions of the keys still unplaced after `_MAX_PROBE_ROUNDS` rounds."""
        slots = self._slots(hashes)
        pending = np.arange(len(hashes))
        for _ in range(self._MAX_PROBE_ROUNDS):
            if not len(pending):
                break
            free = self._buckets[slots] < 0
            # Every key that found a free slot writes itself there; where several share a slot
            # one write lands, and reading the slot back tells which (the keys are distinct).
            cand = np.flatnonzero(free)
            claimed = np.zeros(len(pending), dtype=bool)
            if len(cand):
                cand_slots, cand_keys = slots[cand], hashes[pending[cand]]
                self._keys[cand_slots] = cand_keys
                won = self._keys[cand_slots] == cand_keys
                winners = cand[won]
                self._buckets[cand_slots[won]] = buckets[pending[winners]]
                claimed[winners] = True
            # Losers retry the same slot next round (now taken, so they probe past it); others move on.
            moved = ~claimed
            slots = np.where(free[moved], slots[moved], slots[moved] + 1)
            slots[slots == self._capacity] = 0
            pending = pending[moved]
        return pending

    def _rebuild(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        """Grow the table to hold its keys and `hashes`, laid out anew without probing rounds.

        A key's home slot grows with the key read as uint32, so keys inserted in that order into
        an empty table land at `max(home slot, previous key's slot + 1)`: a running maximum.
        Keys pushed past the last slot found every slot from their home to the end taken, so
        probing wraps them around, in key order, into the first free slots of the table.
        """
        occupied = self._buckets >= 0
        keys = np.concatenate([self._keys[occupied], hashes])
        owners = np.concatenate([self._buckets[occupied], buckets])
        # (The occupied slots, not `_size`: an insert that gave up has placed part of its batch.)
        self._alloc(max(1024, int(len(keys) / self._GROW_TO_LOAD) + 1))
        # One sort of (uint32 key << 16 | bucket) orders the keys and carries their buckets along.
        packed = (keys.view(np.uint32).astype(np.uint64) << np.uint64(16)) | owners.view(np.uint16)
        packed.sort()
        keys = (packed >> np.uint64(16)).astype(np.uint32).view(np.int32)
        owners = (packed & np.uint64(0xFFFF)).astype(np.uint16).view(np.int16)
        rank = np.arange(len(keys), dtype=np.int64)
        slots = np.maximum.accumulate(self._slots(keys) - rank) + rank
        fits = slots < self._capacity
        self._keys[slots[fits]] = keys[fits]
        self._buckets[slots[fits]] = owners[fits]
        if not fits.all():
            spill = ~fits
            free = np.flatnonzero(self._buckets < 0)[: int(np.count_nonzero(spill))]
            self._keys[free] = keys[spill]
            self._buckets[free] = owners[spill]

    def hashes_of(self, bucket: int) -> np.ndarray:
        """Every hash a bucket owns (what its HASH index file lists), in slot order."""
        return self._keys[self._buckets == bucket]

    def hashes_by_bucket(self, buckets: Iterable[int]) -> dict[int, np.ndarray]:
        """`hashes_of` of several buckets, in one pass over the table when they are many."""
        wanted = sorted(set(buckets))
        if len(wanted) <= 4:
            return {b: self.hashes_of(b) for b in wanted}
        slots = np.flatnonzero(self._buckets >= 0)
        owners = self._buckets[slots]
        order = np.argsort(owners, kind="stable")  # int16: a radix sort, slot order kept per bucket
        sorted_owners = owners[order]
        starts = np.searchsorted(sorted_owners, wanted, side="left")
        ends = np.searchsorted(sorted_owners, wanted, side="right")
        return {b: self._keys[slots[order[s:e]]] for b, s, e in zip(wanted, starts, ends, strict=True)}
