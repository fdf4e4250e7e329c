"""Deletion vectors of a snapshot: which rows of which data files are deleted, read for a scan.

A table with `deletion-vectors.enabled` keeps, per (partition, bucket), index files of type
`DELETION_VECTORS` listing for each data file the positions of its rows that a newer record
replaced or deleted. Its readers read every file of level 1 and above as it is, drop the rows
its vector marks, and never see level 0 (not yet looked up), as Paimon's do.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.deletion_vectors import (
    DELETION_VECTORS_INDEX,
    DeletionFile,
    bitmap_bytes,
    deleted_rows,
)
from lakehouse_engine.format.manifest_entries import FileKind
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.options import DELETION_VECTORS_ENABLED, CoreOptions

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

BucketDeletionFiles = dict[tuple[bytes, int], dict[str, DeletionFile]]


def deletion_vectors_enabled(options: CoreOptions) -> bool:
    """The `deletion-vectors.enabled` option (default false)."""
    return options.require(DELETION_VECTORS_ENABLED)


def snapshot_deletion_files(table: FileStore, snapshot: Snapshot) -> BucketDeletionFiles:
    """(partition, bucket) -> data file name -> its deletion file, from `snapshot`'s index manifest.

    Every snapshot lists the index files live at it (not a delta), so time travel reads each
    snapshot with its own vectors. A data file named by two vectors is a damaged index manifest.
    """
    out: BucketDeletionFiles = {}
    if not snapshot.index_manifest:
        return out
    table = getattr(table, "store", table)  # the facade's store (callers pass either)
    index_dir = table.path_factory.index_dir
    for e in table.manifest_io().read_index_manifest(snapshot.index_manifest):
        if e.index_type != DELETION_VECTORS_INDEX:
            continue
        if e.kind != FileKind.ADD or e.dv_ranges is None:
            raise CorruptFileError(
                f"index manifest {snapshot.index_manifest} is damaged: its entry for deletion-vector "
                f"index file {e.file_name} " + ("is not an ADD" if e.kind != FileKind.ADD
                                                 else "lists no ranges"))
        path = e.external_path or f"{index_dir}/{e.file_name}"
        bucket = out.setdefault((e.partition, e.bucket), {})
        for r in e.dv_ranges:
            if r.data_file_name in bucket:
                raise CorruptFileError(
                    f"index manifest {snapshot.index_manifest} is damaged: data file "
                    f"{r.data_file_name} has two deletion vectors (index files "
                    f"{bucket[r.data_file_name].dv_index_path.rsplit('/', 1)[-1]} and {e.file_name})")
            bucket[r.data_file_name] = DeletionFile(path, r.offset, r.length, r.cardinality)
    return out


class DeletionVectorReader:
    """Reads the deleted-row masks of data files, each index file fetched once per reader."""

    def __init__(self, file_io: FileIO):
        self.file_io = file_io
        self._files: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def _index_bytes(self, path: str) -> bytes:
        with self._lock:
            data = self._files.get(path)
        if data is None:
            try:
                data = self.file_io.read_bytes(path)
            except FileNotFoundError:
                raise CorruptFileError(f"deletion-vector index file {path} is missing") from None
            with self._lock:
                self._files[path] = data
        return data

    def keep_mask(self, deletion: DeletionFile, row_count: int) -> np.ndarray:
        """True for each of the `row_count` rows of a data file that its vector does not delete."""
        data = self._index_bytes(deletion.dv_index_path)
        return ~deleted_rows(data, deletion, row_count, deletion.dv_index_path)

    def bitmap(self, deletion: DeletionFile) -> bytes:
        """The vector's bitmap bytes as stored (portable RoaringBitmap layout); `keep_mask` checks them."""
        return bitmap_bytes(self._index_bytes(deletion.dv_index_path), deletion)

