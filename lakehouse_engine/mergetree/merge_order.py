"""The one order in which a bucket's files are merged: oldest first, deterministic on ties.

Every merge of records from several files (merge-on-read, writer compaction, dedicated and Spark
compaction, postpone compaction, rescale) concatenates the files in this order and sorts the rows
stably by (key, sequence number). Equal sequence numbers of one key in two files are therefore
decided by this order, the same way on every path: a full compaction reads what a read returns.

This engine re-sequences concurrent commits (`write/resequence.py`), so its own files never tie;
the rule keeps tables written by other engines (or by two of their jobs at once) deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise

from lakehouse_engine.format.manifest_entries import DataFileMeta


def merge_order_key(f: DataFileMeta) -> tuple[int, int, str]:
    """The sort key of a file in merge order: (max sequence, min sequence, file name)."""
    # The file name is unique within a bucket, so the order is total and never depends on the
    # order files came out of manifests (Python's sort is stable: without it, it would).
    return (f.max_sequence_number, f.min_sequence_number, f.file_name)


def merge_order(files: Iterable[DataFileMeta]) -> list[DataFileMeta]:
    """`files` oldest first, in the order every merge path concatenates them."""
    return sorted(files, key=merge_order_key)


def sequence_disjoint(ordered: Sequence[DataFileMeta]) -> bool:
    """True when files in merge order have strictly increasing, disjoint sequence ranges.

    Then file order is sequence order and a merge need not read `_SEQUENCE_NUMBER`.
    """
    return all(a.max_sequence_number < b.min_sequence_number for a, b in pairwise(ordered))
