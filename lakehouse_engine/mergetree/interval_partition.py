"""Sections of files whose key ranges do not overlap: what merge-on-read and compaction merge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lakehouse_engine.format.manifest_entries import DataFileMeta


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
