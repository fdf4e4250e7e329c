"""The portable RoaringBitmap layout: round trips, the three container kinds, damaged input."""

from __future__ import annotations

import numpy as np
import pytest

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.roaring import decode_roaring, encode_roaring, roaring_mask


def _values(*ranges: np.ndarray) -> np.ndarray:
    return np.unique(np.concatenate(ranges)).astype(np.uint32)


@pytest.mark.parametrize("values", [
    np.empty(0, np.uint32),
    np.array([0], np.uint32),
    np.array([65535, 65536, 2**32 - 1], np.uint32),
    _values(np.arange(0, 200_000, 3)),               # bitmap containers (> 4096 values each)
    _values(np.arange(10, 5000), np.arange(70_000, 70_010)),  # a bitmap and an array container
])  # fmt: skip
def test_values_round_trip(values: np.ndarray) -> None:
    data = encode_roaring(values)
    assert np.array_equal(decode_roaring(data), values)


def test_encoding_is_the_no_run_layout_byte_for_byte() -> None:
    # cookie 12346, one container, key 1 with 2 values, its offset (16), then values 5 and 7.
    data = encode_roaring(np.array([65541, 65543], np.uint32))
    assert data == bytes.fromhex("3a300000" "01000000" "0100" "0100" "10000000" "0500" "0700")


def test_run_containers_decode() -> None:
    # The run layout Java's RoaringBitmap writes after runOptimize: cookie 12347 | (n-1) << 16,
    # a run bitmap, keys and cardinalities, no offsets below 4 containers, then the runs.
    header = (12347 | (1 << 16)).to_bytes(4, "little") + bytes([0b01])
    header += bytes.fromhex("0000" "0f00") + bytes.fromhex("0200" "0100")  # key 0: 16 values; key 2: 2 values
    body = bytes.fromhex("0200" "0a00" "0900" "6400" "0500")  # runs [10..19], [100..105]
    body += bytes.fromhex("0300" "0400")                      # array: 3, 4
    values = decode_roaring(header + body)
    assert values.tolist() == list(range(10, 20)) + list(range(100, 106)) + [131075, 131076]


def test_mask_marks_each_value() -> None:
    values = _values(np.arange(0, 100_000, 2), np.array([150_000]))
    mask = roaring_mask(encode_roaring(values), 150_001)
    assert np.array_equal(np.flatnonzero(mask), values)


def test_mask_refuses_a_position_past_the_rows() -> None:
    with pytest.raises(CorruptFileError, match="beyond the 10 positions"):
        roaring_mask(encode_roaring(np.array([3, 10], np.uint32)), 10)
    with pytest.raises(CorruptFileError, match="beyond the 10 positions"):
        roaring_mask(encode_roaring(np.arange(0, 9000, 2, dtype=np.uint32)), 10)


@pytest.mark.parametrize("damage", ["cookie", "truncated", "trailing", "unsorted"])
def test_damaged_bitmaps_are_corrupt(damage: str) -> None:
    data = bytearray(encode_roaring(np.array([5, 7, 70_000], np.uint32)))
    if damage == "cookie":
        data[0] ^= 0xFF
    elif damage == "truncated":
        del data[-1]
    elif damage == "trailing":
        data += b"\0"
    else:
        data[-6:-4], data[-4:-2] = data[-4:-2], data[-6:-4]  # the values 7 and 5 swapped
    with pytest.raises(CorruptFileError, match="RoaringBitmap"):
        decode_roaring(bytes(data))
