"""A bucket's deletion vectors written as index files, rolled at `deletion-vector.index-file.target-size`.

As Paimon's DeletionVectorIndexFileWriter does: all vectors of a bucket are written together
(the new files replace the bucket's old ones in the index manifest), in data file order, into
one index file until the file is past the target size, then into the next. A bucket left with
no vector gets one empty index file (the version byte and no ranges), as Paimon 0.9 writes it.
The manifest entry's row count is the number of vectors in the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from lakehouse_engine.format.deletion_vectors import (
    DELETION_VECTORS_INDEX,
    frame_vector,
    index_file_bytes,
)
from lakehouse_engine.format.manifest_entries import FileKind, IndexManifestEntry
from lakehouse_engine.io import FileIO

#: Paimon's default of `deletion-vector.index-file.target-size`.
DEFAULT_INDEX_FILE_TARGET_SIZE = 2 << 20


def write_deletion_vector_files(file_io: FileIO, index_dir: str, new_file_name: Callable[[], str],
                                partition: bytes, bucket: int, vectors: Mapping[str, np.ndarray],
                                target_size: int = DEFAULT_INDEX_FILE_TARGET_SIZE) -> list[IndexManifestEntry]:
    """Write `vectors` (data file name -> sorted deleted positions; empty vectors left out) as the
    index files of one bucket; their ADD entries for the index manifest."""
    groups: list[list[tuple[str, bytes, int]]] = [[]]
    size = 1  # the version byte
    for name, positions in sorted(vectors.items()):
        if not len(positions):
            continue
        if groups[-1] and size > target_size:  # Paimon closes a file once it is past the target
            groups.append([])
            size = 1
        frame = frame_vector(np.asarray(positions, dtype=np.uint32))
        groups[-1].append((name, frame, len(positions)))
        size += len(frame)
    entries = []
    for group in groups:
        data, ranges = index_file_bytes(group)
        name = new_file_name()
        file_io.write_bytes(f"{index_dir}/{name}", data)
        entries.append(IndexManifestEntry(FileKind.ADD, partition, bucket, DELETION_VECTORS_INDEX, name,
                                          len(data), len(ranges), dv_ranges=tuple(ranges)))
    return entries
