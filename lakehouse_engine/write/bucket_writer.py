"""BucketWriter: one (partition, bucket) of a TableWrite: its buffered rows with their sequence numbers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry
from lakehouse_engine.mergetree.compact.levels import Levels
from lakehouse_engine.partition import Partition
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND


class BucketWriter:
    """Rows of one (partition, bucket) waiting to become a level-0 sorted run, and the files the
    bucket's flushes and compactions wrote since the last commit message."""

    def __init__(self, partition: Partition, bucket: int, total_buckets: int, next_sequence: int):
        """A writer of `bucket` of `partition` (of `total_buckets`), numbering its rows from `next_sequence`."""
        self.partition = partition
        self.bucket = bucket
        self.total_buckets = total_buckets
        self.next_sequence = next_sequence
        self.tables: list[pa.Table] = []
        self.nbytes = 0
        self.new_files: list[DataFileMeta] = []
        self.levels: Levels | None = None
        self.compact_before: list[DataFileMeta] = []
        self.compact_after: list[DataFileMeta] = []
        #: Index files the flush lookup made for this bucket since the last commit message.
        self.lookup_index_files: list[IndexManifestEntry] = []
        #: Changelog files of the new data (input producer) and of compaction (lookup, full-compaction).
        self.new_changelog: list[DataFileMeta] = []
        self.compact_changelog: list[DataFileMeta] = []
        #: The files of the bucket the first flush lookup since the last message compared rows with.
        self.lookup_base: list[str] | None = None
        #: A DV table's compaction at commit: new vector index files, and what they were computed against.
        self.deletion_vector_files: list[IndexManifestEntry] = []
        self.deletion_vector_base: tuple[list[str], list[str]] | None = None
        #: A DV table's new level-0 files' keys, kept from the flush so its lookup need not read them.
        self.new_keys: dict[str, pa.Table] = {}

    def write(self, rows: pa.Table, kinds: np.ndarray) -> int:
        """Buffer `rows` with their row kinds (int8 `_VALUE_KIND` codes), numbered in arrival order;
        the bytes they now take in the buffer."""
        n = rows.num_rows
        seq = np.arange(self.next_sequence, self.next_sequence + n, dtype=np.int64)
        self.next_sequence += n
        rows = rows.append_column(SEQUENCE_NUMBER, pa.array(seq)).append_column(
            VALUE_KIND, pa.array(kinds, type=pa.int8()))
        self.tables.append(rows)
        self.nbytes += rows.nbytes
        return rows.nbytes
