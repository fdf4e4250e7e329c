"""Splits: the files of one (partition, bucket) that a reader merges together, and how they are packed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehouse_engine.format.manifest_entries import DataFileMeta


class PartitionRow(bytes):
    """A split's partition: the BinaryRow bytes manifests store, which also reads as pypaimon's
    partition row (`values`, `fields`, `get_field(i)`, `to_dict()`)."""

    values: tuple[Any, ...]
    fields: list[Any]

    def __new__(cls, binary: bytes, values: tuple[Any, ...], fields: Sequence[Any]) -> PartitionRow:
        row = super().__new__(cls, binary)
        row.values = tuple(values)
        row.fields = list(fields)
        return row

    def get_field(self, pos: int) -> Any:
        return self.values[pos]

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

    @property
    def files(self) -> list[DataFileMeta]:
        return [f for s in self.sections for f in s]

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self.files)

    @property
    def file_paths(self) -> list[str]:
        return [f"{self.bucket_path}/{f.file_name}" for f in self.files]


def interval_partition(files: Sequence[DataFileMeta],
                       key_of: Callable[[bytes], tuple[Any, ...]]) -> list[list[DataFileMeta]]:
    """Group files into sections whose key ranges do not overlap (Paimon's IntervalPartition).

    Files are sorted by (min key, max key); a file starts a new section when its min key is above
    the largest max key seen in the current section.
    """
    keyed = sorted(((key_of(f.min_key), key_of(f.max_key), f) for f in files), key=lambda t: (t[0], t[1]))
    if any(lo > hi for lo, hi, _ in keyed):
        # A writer that sorts NaN first (pypaimon 2.1.0) leaves a first key above the last one in
        # Java's order: such a file's range says nothing, so every file is merged with every other.
        return [[f for _, _, f in keyed]]
    sections: list[list[DataFileMeta]] = []
    bound: tuple[Any, ...] | None = None
    for lo, hi, f in keyed:
        if bound is None or lo > bound:
            sections.append([f])
            bound = hi
        else:
            sections[-1].append(f)
            bound = max(bound, hi)
    return sections


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
