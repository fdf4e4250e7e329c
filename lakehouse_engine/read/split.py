"""Splits: the files of one (partition, bucket) that a reader merges together, and how they are packed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehouse_engine.format.deletion_vectors import DeletionFile
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.interval_partition import interval_partition

__all__ = ["DataSplit", "interval_partition", "ordered_pack"]


class PartitionRow(bytes):
    """A split's partition: the BinaryRow bytes manifests store, which also reads as pypaimon's
    partition row (`values`, `fields`, `get_field(i)`, `to_dict()`)."""

    values: list[Any]  # a list, as pypaimon's GenericRow holds them (`split.partition_values` is a tuple)
    fields: list[Any]

    def __new__(cls, binary: bytes, values: Sequence[Any], fields: Sequence[Any]) -> PartitionRow:
        row = super().__new__(cls, binary)
        row.values = list(values)
        row.fields = list(fields)
        return row

    def get_field(self, pos: int) -> Any:
        return self.values[pos]

    def __iter__(self) -> Iterator[Any]:
        # The values, as pypaimon's partition tuples iterate (`tuple(message.partition)`); the
        # bytes stay reachable through the buffer protocol (`bytes(row)`, slicing, hashing).
        return iter(self.values)

    def to_dict(self) -> dict[str, Any]:
        """Partition key -> value."""
        return {f.name: v for f, v in zip(self.fields, self.values, strict=True)}

    def __reduce__(self) -> Any:
        # Picklable with its values (splits cross process boundaries in Spark).
        return (PartitionRow, (bytes(self), self.values, self.fields))


@dataclass
class DataSplit:
    """Files of one (partition, bucket) read together; `sections` are key-disjoint groups of files."""

    snapshot_id: int
    partition: bytes
    partition_values: tuple[Any, ...]
    bucket: int
    total_buckets: int
    bucket_path: str
    sections: list[list[DataFileMeta]] = field(default_factory=list)
    raw_convertible: bool = False
    #: The branch whose files these are, when not the scanned table's (`scan.fallback-branch`).
    branch: str | None = None
    # Per file of `files`, its deletion vector's place (None: no row deleted); None when the
    # table keeps no deletion vectors (pypaimon's `data_deletion_files`).
    data_deletion_files: list[DeletionFile | None] | None = None

    @property
    def files(self) -> list[DataFileMeta]:
        return [f for s in self.sections for f in s]

    @property
    def row_count(self) -> int:
        """Rows stored in the split's files (deleted rows included, as pypaimon's `row_count`)."""
        return sum(f.row_count for f in self.files)

    def merged_row_count_available(self) -> bool:
        """Whether the rows a read of the split returns can be counted from metadata alone (Paimon's
        `DataSplit.mergedRowCountAvailable`): a raw-convertible split whose deletion vectors all
        carry their cardinality (Paimon 0.9's index manifests do not record it)."""
        return self.raw_convertible and (
            self.data_deletion_files is None
            or all(d is None or d.cardinality is not None for d in self.data_deletion_files))

    def merged_row_count(self) -> int | None:
        """Rows a read of the split returns, when known without reading (Paimon's
        `DataSplit.mergedRowCount`, pypaimon's None when not): the files' rows less those their
        deletion vectors delete; None when the files must be merged or a cardinality is unknown."""
        if not self.merged_row_count_available():
            return None
        return self.partial_merged_row_count()

    def partial_merged_row_count(self) -> int:
        """`merged_row_count` as far as metadata tells (Paimon's `partialMergedRowCount`): 0 for a
        split that is not raw-convertible; a file whose vector's cardinality is unknown adds 0."""
        if not self.raw_convertible:
            return 0
        deletions = self.data_deletion_files or [None] * len(self.files)
        total = 0
        for f, d in zip(self.files, deletions, strict=True):
            if d is None:
                total += f.row_count
            elif d.cardinality is not None:
                total += f.row_count - d.cardinality
        return total

    def deletion_file(self, file_name: str) -> DeletionFile | None:
        """The deletion vector of one of the split's files, if it has one."""
        if self.data_deletion_files is None:
            return None
        for f, d in zip(self.files, self.data_deletion_files, strict=True):
            if f.file_name == file_name:
                return d
        return None

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self.files)

    @property
    def file_paths(self) -> list[str]:
        return [f"{self.bucket_path}/{f.file_name}" for f in self.files]


def ordered_pack(weights: Sequence[int], target: int) -> list[list[int]]:
    """Pack items in order into bins of at most `target` weight (an oversize item gets its own bin)."""
    bins: list[list[int]] = []
    current: list[int] = []
    total = 0
    for i, w in enumerate(weights):
        if current and total + w > target:
            bins.append(current)
            current, total = [], 0
        current.append(i)
        total += w
    if current:
        bins.append(current)
    return bins
