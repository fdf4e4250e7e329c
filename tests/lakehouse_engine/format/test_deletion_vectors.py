"""Deletion-vector index files: Paimon's layout, checksums, and every damaged byte refused."""

from __future__ import annotations

import numpy as np
import pytest

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.deletion_vectors import (
    BITMAP_MAGIC_NUMBER,
    DeletionFile,
    deleted_rows,
    encode_deletion_vectors,
)


def _file(metas: list, i: int) -> DeletionFile:
    m = metas[i]
    return DeletionFile("index-x-0", m.offset, m.length, m.cardinality)


def test_index_file_layout_is_version_then_size_magic_bitmap_crc() -> None:
    data, metas = encode_deletion_vectors([("a.parquet", np.array([1, 3], np.uint32)),
                                           ("b.parquet", np.array([0], np.uint32))])
    assert data[0] == 1
    first = metas[0]
    assert (first.data_file_name, first.offset, first.cardinality) == ("a.parquet", 1, 2)
    assert int.from_bytes(data[1:5], "big") == first.length
    assert int.from_bytes(data[5:9], "big") == BITMAP_MAGIC_NUMBER
    assert metas[1].offset == 1 + 4 + first.length + 4
    assert len(data) == metas[1].offset + 8 + metas[1].length


def test_vectors_read_back_as_masks() -> None:
    data, metas = encode_deletion_vectors([("a.parquet", np.array([1, 3], np.uint32)),
                                           ("b.parquet", np.arange(0, 9000, 2, dtype=np.uint32))])
    assert np.flatnonzero(deleted_rows(data, _file(metas, 0), 5, "i")).tolist() == [1, 3]
    assert np.array_equal(np.flatnonzero(deleted_rows(data, _file(metas, 1), 9000, "i")),
                          np.arange(0, 9000, 2))


def test_every_flipped_byte_of_a_vector_is_a_corrupt_file_naming_the_index_file() -> None:
    data, metas = encode_deletion_vectors([("a.parquet", np.array([1, 3, 70_000], np.uint32))])
    deletion = _file(metas, 0)
    for i in range(len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0x04
        with pytest.raises(CorruptFileError, match="index-x-0"):
            deleted_rows(bytes(damaged), deletion, 80_000, "index-x-0")


def test_a_range_or_cardinality_that_disagrees_with_the_file_is_corrupt() -> None:
    data, metas = encode_deletion_vectors([("a.parquet", np.array([1, 3], np.uint32))])
    m = metas[0]
    for bad in (DeletionFile("i", m.offset, m.length + 1, None), DeletionFile("i", 50, m.length, None),
                DeletionFile("i", m.offset, m.length, 3)):
        with pytest.raises(CorruptFileError, match="index-x-0"):
            deleted_rows(data, bad, 5, "index-x-0")
    with pytest.raises(CorruptFileError, match="beyond"):
        deleted_rows(data, _file(metas, 0), 3, "index-x-0")
