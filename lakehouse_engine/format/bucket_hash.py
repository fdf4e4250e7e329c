"""Paimon's fixed-bucket hash, vectorised with NumPy.

Java's `BinaryRow.hashCode()` is MurmurHash3 (x86, 32-bit) run word by word (`hashBytesByWords`,
seed 42) over the row bytes without the manifest's arity prefix. A BinaryRow is always a whole
number of 8-byte words, so there is never a tail. The hash of row i depends only on its own
words, so we walk word positions and update every row that has a word there at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.format.binary_row import Column
from lakehouse_engine.format.binary_rows import RowBlock, encode_rows
from lakehouse_engine.types import DataType

SEED = 42
_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_N = np.uint32(0xE6546B64)
_FIVE = np.uint32(5)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
# Below this many rows still hashing a long variable part, finish them one by one in Python.
_SCALAR_TAIL_ROWS = 8


def _mix(h: np.ndarray, words: np.ndarray, k: np.ndarray, tmp: np.ndarray) -> None:
    """h = mix_h1(h, mix_k1(words)) in place; k and tmp are scratch arrays shaped like h."""
    np.multiply(words, _C1, out=k)
    np.left_shift(k, np.uint32(15), out=tmp)
    np.right_shift(k, np.uint32(17), out=k)
    np.bitwise_or(k, tmp, out=k)
    np.multiply(k, _C2, out=k)
    np.bitwise_xor(h, k, out=h)
    np.left_shift(h, np.uint32(13), out=tmp)
    np.right_shift(h, np.uint32(19), out=h)
    np.bitwise_or(h, tmp, out=h)
    np.multiply(h, _FIVE, out=h)
    np.add(h, _N, out=h)


def _mix_scalar(h: int, word: int) -> int:
    k = (word * 0xCC9E2D51) & 0xFFFFFFFF
    k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
    h ^= (k * 0x1B873593) & 0xFFFFFFFF
    h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
    return (h * 5 + 0xE6546B64) & 0xFFFFFFFF


def hash_int(value: int, seed: int = SEED) -> int:
    """MurmurHash3 x86_32 of one 4-byte int, signed: Spark's `Murmur3_x86_32.hashInt`, what its
    hash partitioning applies to an INT column."""
    h = np.array([_mix_scalar(seed & 0xFFFFFFFF, value & 0xFFFFFFFF)], dtype=np.uint32)
    return int(_fmix(h, np.array([4])).view(np.int32)[0])


def _fmix(h: np.ndarray, length: np.ndarray) -> np.ndarray:
    """MurmurHash3's finalizer, in place, with each row's byte length."""
    np.bitwise_xor(h, length.astype(np.uint32), out=h)
    tmp = np.empty_like(h)
    for shift, factor in ((16, _F1), (13, _F2), (16, None)):
        np.right_shift(h, np.uint32(shift), out=tmp)
        np.bitwise_xor(h, tmp, out=h)
        if factor is not None:
            np.multiply(h, factor, out=h)
    return h


def _hash_var_part(h: np.ndarray, block: RowBlock) -> None:
    """Continue each row's hash over its variable part (rows sorted by word count, longest first)."""
    nwords = block.var_len // 4
    if not nwords.any():
        return
    words = block.var.view("<u4")
    longest = int(nwords.max())
    # A stable sort of small unsigned keys is a radix sort in NumPy: linear time.
    key = (longest - nwords).astype(np.uint16 if longest < 1 << 16 else np.int64)
    order = np.argsort(key, kind="stable")
    first = block.var_start[order] // 4
    hs = h[order]
    # active[j] = number of rows that still have a word at position j.
    active = np.searchsorted(-nwords[order], -np.arange(longest), side="left")
    k = np.empty_like(hs)
    tmp = np.empty_like(hs)
    for j, count in enumerate(active.tolist()):
        if count <= _SCALAR_TAIL_ROWS and len(active) - j > 4 * _SCALAR_TAIL_ROWS:
            for r in range(count):
                state = int(hs[r])
                start, stop = int(first[r]) + j, int(first[r]) + int(nwords[order[r]])
                for w in words[start:stop].tolist():
                    state = _mix_scalar(state, w)
                hs[r] = state
            break
        _mix(hs[:count], words[first[:count] + j], k[:count], tmp[:count])
    h[order] = hs


def hash_block(block: RowBlock) -> np.ndarray:
    """Java `BinaryRow.hashCode()` (int32) of every row laid out in `block`."""
    n = block.fixed.shape[0]
    fixed_words = block.fixed.view("<u4")
    # Leading words that are zero in every row (the header of a row without nulls) leave every
    # row's state equal: mix them once, as a scalar, and start the vector from there.
    start, state = 0, SEED
    while start < fixed_words.shape[1] and not fixed_words[:, start].any():
        state = _mix_scalar(state, 0)
        start += 1
    h = np.full(n, state, np.uint32)
    k = np.empty(n, np.uint32)
    tmp = np.empty(n, np.uint32)
    for j in range(start, fixed_words.shape[1]):
        _mix(h, fixed_words[:, j], k, tmp)
    _hash_var_part(h, block)
    return _fmix(h, block.fixed_size + block.var_len).view(np.int32)


def hash_rows(
    columns: Sequence[Column], types: Sequence[DataType], *, names: Sequence[str] | None = None
) -> np.ndarray:
    """Paimon's bucket-key hash (int32 per row): `BinaryRow.hashCode()` of each row's key fields."""
    return hash_block(encode_rows(columns, types, names=names))


def bucket_of(hashes: np.ndarray, num_buckets: int | np.ndarray) -> np.ndarray:
    """Fixed-bucket assignment `abs(hash % num_buckets)` with Java's truncating remainder (int32).

    `num_buckets` is one count, or one per row (rows of partitions rescaled to their own counts).
    """
    counts = np.asarray(num_buckets, dtype=np.int64)
    if counts.size and counts.min() <= 0:
        raise InvalidOptionError(f"bucket count must be positive, got {int(counts.min())}")
    rem = np.fmod(np.asarray(hashes, dtype=np.int64), counts)
    return np.abs(rem).astype(np.int32)


if __name__ == "__main__":  # pragma: no cover - a quick timing check
    import time

    import pyarrow as pa

    rng = np.random.default_rng(0)
    big = pa.array(rng.integers(-(2**62), 2**62, 1_000_000))
    lengths = rng.integers(0, 20, 1_000_000)
    strs = pa.array(["k" * int(n) + str(i) for i, n in enumerate(lengths)])
    for label, cols, tys in [
        ("1M BIGINT", [big], [DataType("BIGINT")]),
        ("1M STRING", [strs], [DataType("STRING")]),
        ("1M BIGINT+STRING", [big, strs], [DataType("BIGINT"), DataType("STRING")]),
    ]:
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            hash_rows(cols, tys)
            best = min(best, time.perf_counter() - t0)
        print(f"{label}: {best * 1000:.1f} ms")
