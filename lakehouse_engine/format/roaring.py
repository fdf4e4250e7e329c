"""The portable RoaringBitmap layout (Java RoaringBitmap's and CRoaring's), as sorted NumPy positions.

A bitmap of 32-bit values is split into containers by the high 16 bits. The layout, all
little-endian:

1. A cookie. `12346` then the container count (uint32 each): no run containers. Or
   `12347 | (count - 1) << 16` followed by one bit per container (set: a run container).
2. Per container its key (the high 16 bits) and its cardinality minus one (uint16 each).
3. Per container the byte offset of its body (uint32), unless the cookie is the run form
   with fewer than 4 containers.
4. The bodies: an array container (at most 4096 values) lists its low 16 bits (uint16 each);
   a bitmap container is 65536 bits (1024 uint64); a run container is a run count and per run
   a start and a length minus one (uint16 each).

Decoding and encoding loop over containers (one per 65536 positions), never over values.
"""

from __future__ import annotations

import numpy as np

from lakehouse_engine.errors import CorruptFileError

_SERIAL_COOKIE_NO_RUN = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX = 4096
_BITMAP_BYTES = 8192


def decode_roaring(data: bytes | memoryview) -> np.ndarray:
    """The sorted uint32 values of a portable RoaringBitmap; CorruptFileError if `data` is not one."""
    parts = [(np.flatnonzero(low) if low.dtype == bool else low) + (key << 16)
             for key, low in _containers(data)]
    if not parts:
        return np.empty(0, dtype=np.uint32)
    return np.concatenate(parts).astype(np.uint32)


def roaring_mask(data: bytes | memoryview, size: int) -> np.ndarray:
    """A boolean array of `size` positions, True where the portable RoaringBitmap `data` holds the
    position; CorruptFileError if `data` is not one or holds a position >= `size`."""
    mask = np.zeros(size, dtype=bool)
    for key, low in _containers(data):
        base = key << 16
        if low.dtype == bool:  # a bitmap container: its bits are the mask of its 65536 positions
            inside = max(0, min(65536, size - base))
            if low[inside:].any():
                raise CorruptFileError(f"RoaringBitmap holds a position beyond the {size} positions "
                                       f"it marks")
            mask[base:base + inside] = low[:inside]
            continue
        if len(low) and base + int(low[-1]) >= size:
            raise CorruptFileError(f"RoaringBitmap holds position {base + int(low[-1])}, "
                                   f"beyond the {size} positions it marks")
        mask[low + base] = True
    return mask


def _containers(data: bytes | memoryview) -> list[tuple[int, np.ndarray]]:
    """(key, low 16 bits) per container: int64 values, or for a bitmap container its 65536 bits."""
    buf = memoryview(data)
    try:
        return _decode(buf)
    except (ValueError, IndexError) as exc:  # a short or inconsistent buffer
        raise CorruptFileError(f"not a portable RoaringBitmap: {exc}") from None


def _decode(buf: memoryview) -> list[tuple[int, np.ndarray]]:
    n = len(buf)
    cookie = int(np.frombuffer(buf, "<u4", 1, 0)[0])
    pos = 4
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        count = (cookie >> 16) + 1
        run_bits = np.unpackbits(np.frombuffer(buf, np.uint8, (count + 7) // 8, pos), bitorder="little")
        is_run = run_bits[:count].astype(bool)
        pos += (count + 7) // 8
        has_offsets = count >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        count = int(np.frombuffer(buf, "<u4", 1, pos)[0])
        pos += 4
        is_run = np.zeros(count, dtype=bool)
        has_offsets = True
    else:
        raise ValueError(f"unknown cookie {cookie}")
    if count > 65536:
        raise ValueError(f"{count} containers")
    header = np.frombuffer(buf, "<u2", 2 * count, pos).reshape(count, 2).astype(np.int64)
    pos += 4 * count
    keys, cards = header[:, 0], header[:, 1] + 1
    if count and np.any(np.diff(keys) <= 0):
        raise ValueError("container keys out of order")
    if has_offsets:
        pos += 4 * count  # the offsets repeat what the bodies' sizes say; read the bodies in order
    parts = []
    for i in range(count):
        card = int(cards[i])
        if is_run[i]:
            runs = int(np.frombuffer(buf, "<u2", 1, pos)[0])
            pairs = np.frombuffer(buf, "<u2", 2 * runs, pos + 2).reshape(runs, 2).astype(np.int64)
            pos += 2 + 4 * runs
            lengths = pairs[:, 1] + 1
            if int(lengths.sum()) != card:
                raise ValueError(f"run container {i} holds {int(lengths.sum())} values, header says {card}")
            starts = np.repeat(pairs[:, 0] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
            low = starts + np.arange(card)
        elif card <= _ARRAY_MAX:
            low = np.frombuffer(buf, "<u2", card, pos).astype(np.int64)
            pos += 2 * card
        else:
            bits = np.unpackbits(np.frombuffer(buf, np.uint8, _BITMAP_BYTES, pos), bitorder="little")
            pos += _BITMAP_BYTES
            held = int(np.count_nonzero(bits))
            if held != card:
                raise ValueError(f"bitmap container {i} holds {held} values, header says {card}")
            parts.append((int(keys[i]), bits.view(bool)))
            continue
        if len(low) > 1 and np.any(np.diff(low) <= 0):
            raise ValueError(f"container {i} is not sorted")
        if len(low) and (low[0] < 0 or low[-1] > 0xFFFF):
            raise ValueError(f"container {i} holds a value outside 16 bits")
        parts.append((int(keys[i]), low))
    if pos != n:
        raise ValueError(f"{n - pos} bytes after the last container")
    return parts


def encode_roaring(values: np.ndarray) -> bytes:
    """The portable RoaringBitmap of sorted, distinct uint32 `values` (array and bitmap containers)."""
    v = np.asarray(values, dtype=np.uint32)
    if len(v) > 1 and np.any(np.diff(v.astype(np.int64)) <= 0):
        raise ValueError("roaring values must be sorted and distinct")
    high = (v >> 16).astype(np.uint16)
    keys, starts, cards = np.unique(high, return_index=True, return_counts=True)
    count = len(keys)
    bodies = []
    for key_start, card in zip(starts.tolist(), cards.tolist(), strict=True):
        low = (v[key_start:key_start + card] & 0xFFFF).astype("<u2")
        if card <= _ARRAY_MAX:
            bodies.append(low.tobytes())
        else:
            bits = np.zeros(65536, dtype=np.uint8)
            bits[low.astype(np.int64)] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
    header = np.empty((count, 2), dtype="<u2")
    header[:, 0] = keys
    header[:, 1] = cards - 1
    first = 8 + 4 * count + 4 * count
    sizes = np.array([len(b) for b in bodies], dtype=np.int64)
    offsets = (first + np.concatenate(([0], np.cumsum(sizes)[:-1]))).astype("<u4") if count else \
        np.empty(0, dtype="<u4")
    return b"".join([np.array([_SERIAL_COOKIE_NO_RUN, count], dtype="<u4").tobytes(),
                     header.tobytes(), offsets.tobytes(), *bodies])
