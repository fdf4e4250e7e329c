"""Deletion-vector index files (`index/index-<uuid>-<n>`, index type `DELETION_VECTORS`): the bytes.

As Paimon's `DeletionVectorsIndexFile` writes them (big-endian):

1. A version byte, 1.
2. Per data file, at the offset its index manifest range names: the size of what follows
   (int32), Paimon's bitmap magic number 1581511376 (int32), the positions of the file's
   deleted rows as a portable RoaringBitmap (`roaring.py`), then the CRC32 of magic number
   and bitmap (int32). The range's length is that size; 1.x ranges also carry the cardinality.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lakehouse_engine.errors import CorruptFileError, UnsupportedError
from lakehouse_engine.format.manifest_entries import DeletionVectorMeta
from lakehouse_engine.format.roaring import encode_roaring, roaring_mask

DELETION_VECTORS_INDEX = "DELETION_VECTORS"
VERSION = 1
BITMAP_MAGIC_NUMBER = 1581511376
# Paimon 1.x's 64-bit vectors (Iceberg-compatible) carry another magic number; 0.9 has none.
_BITMAP64_MAGIC_NUMBER = 1681511377

_INT = struct.Struct(">i")
_UINT = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class DeletionFile:
    """Where a data file's deletion vector is: the index file, the range in it, its cardinality
    (pypaimon's and Paimon's `DeletionFile`)."""

    dv_index_path: str
    offset: int
    length: int
    cardinality: int | None = None


def frame_vector(positions: np.ndarray) -> bytes:
    """One vector as an index file holds it: size, magic number, bitmap, checksum."""
    body = _UINT.pack(BITMAP_MAGIC_NUMBER) + encode_roaring(positions)
    return _INT.pack(len(body)) + body + _UINT.pack(zlib.crc32(body))


def index_file_bytes(frames: Sequence[tuple[str, bytes, int]]) -> tuple[bytes, list[DeletionVectorMeta]]:
    """An index file of (data file name, framed vector, cardinality) in order, and its ranges."""
    offset = 1
    metas = []
    for name, frame, cardinality in frames:
        metas.append(DeletionVectorMeta(name, offset, len(frame) - 8, cardinality))
        offset += len(frame)
    return b"".join([bytes([VERSION])] + [f for _, f, _ in frames]), metas


def encode_deletion_vectors(vectors: Sequence[tuple[str, np.ndarray]]) -> tuple[bytes, list[DeletionVectorMeta]]:
    """An index file holding each (data file name, sorted deleted positions) in order, and the
    ranges its index manifest entry lists."""
    return index_file_bytes([(name, frame_vector(p), len(p)) for name, p in vectors])


def bitmap_bytes(data: bytes, deletion: DeletionFile) -> bytes:
    """The bitmap (portable RoaringBitmap layout) of the vector at `deletion`'s range of an index
    file's bytes: after its size and magic number, up to its checksum (check it with `deleted_rows`)."""
    return data[deletion.offset + 8:deletion.offset + 4 + deletion.length]


def deleted_rows(data: bytes, deletion: DeletionFile, row_count: int, index_file: str) -> np.ndarray:
    """The deleted-row mask (`row_count` booleans) of one data file, read from the index file's
    bytes `data`; CorruptFileError naming `index_file` when the bytes cannot be the vector (wrong
    version, size, checksum, magic number, cardinality, or a position past the file's rows)."""
    def corrupt(what: str) -> CorruptFileError:
        return CorruptFileError(f"deletion-vector index file {index_file} is damaged: {what} "
                                f"(range {deletion.offset}+{deletion.length})")

    if not data or data[0] != VERSION:
        raise corrupt(f"version byte {data[0] if data else None}, expected {VERSION}")
    start, size = deletion.offset, deletion.length
    if start < 1 or size < 4 or start + 8 + size > len(data):
        raise corrupt(f"the range lies outside its {len(data)} bytes")
    (stored_size,) = _INT.unpack_from(data, start)
    if stored_size != size:
        raise corrupt(f"size {stored_size} where the index manifest says {size}")
    body = memoryview(data)[start + 4:start + 4 + size]
    (crc,) = _UINT.unpack_from(data, start + 4 + size)
    if zlib.crc32(body) != crc:
        raise corrupt("checksum mismatch")
    (magic,) = _UINT.unpack_from(body, 0)
    if magic == _BITMAP64_MAGIC_NUMBER:
        raise UnsupportedError(f"deletion-vector index file {index_file} holds a 64-bit deletion "
                               f"vector (Paimon 1.x), which this engine does not read")
    if magic != BITMAP_MAGIC_NUMBER:
        raise corrupt(f"magic number {magic}, expected {BITMAP_MAGIC_NUMBER}")
    try:
        mask = roaring_mask(body[4:], row_count)
    except CorruptFileError as exc:
        raise corrupt(str(exc)) from None
    if deletion.cardinality is not None and int(np.count_nonzero(mask)) != deletion.cardinality:
        raise corrupt(f"{int(np.count_nonzero(mask))} deleted rows where the index manifest says "
                      f"{deletion.cardinality}")
    return mask
