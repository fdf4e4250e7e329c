"""One merge of a bucket's sorted runs, key range by key range, in memory bounded by an option.

Every path that merges a bucket's files (merge-on-read, writer and dedicated compaction, rescale,
the Spark tasks) merges them here. Each file is a sorted run read as a stream of batches (parquet
and Avro `sort-spill-buffer-size / (2 x files)` decoded bytes at a time, ORC a stripe at a time).
The merge proceeds in rounds:

1. Every file whose buffered rows ran low (or whose buffer ends at the last round's bound) reads
   its next batch; the files read at once, on the merge's threads.
2. The bound of the round is the smallest last buffered key among the files not yet exhausted:
   no row still unread can have a key below it, because each file is sorted.
3. The rows of every file with keys below the bound (a binary search per buffer) are taken out,
   concatenated in merge order (`merge_order`: oldest file first) and merged by the table's
   merge function; the merged range is yielded.

Each range holds every record of its keys and records stand in the one merge order, so the
ranges concatenated are exactly the merge of the whole section, ties by sequence number
included, for every merge engine. Memory is about three times the option (buffers, the round's
rows, the merged range; a compaction also holds the range being written), whatever the bucket's
size. A section holding a file whose first key
lies above its last in Java's order (pypaimon's NaN-first files) is not sorted as the merge
reads it: it is merged whole, as before.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from lakehouse_engine.format.float_order import comparable
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.merge_order import merge_order, sequence_disjoint
from lakehouse_engine.options import SORT_SPILL_BUFFER_SIZE, CoreOptions
from lakehouse_engine.threads import cores

__all__ = ["FileBatches", "merge_budget", "range_merge"]

#: Reads one data file as batches of about the given decoded bytes each.
FileBatches = Callable[[DataFileMeta, int], Iterator[pa.Table]]
#: Merges the records of some keys (rows in merge order; True: file order is sequence order).
MergeRange = Callable[[pa.Table, bool], pa.Table]


def merge_budget(options: CoreOptions) -> int:
    """The bytes of decoded rows one merge may hold at once (`sort-spill-buffer-size`)."""
    return int(options.require(SORT_SPILL_BUFFER_SIZE))


def range_merge(files: Sequence[DataFileMeta], read: FileBatches, key_names: Sequence[str],
                merge: MergeRange, budget: int,
                key_of: Callable[[bytes], tuple[Any, ...]]) -> Iterator[pa.Table]:
    """The merge of `files` (one bucket's, any overlap), yielded as merged key ranges in key order.

    Args:
        files: the files to merge; they are read in merge order.
        read: reads one file as batches of about the given bytes (see `FileBatches`).
        key_names: the key columns (they are among the columns `read` returns).
        merge: merges one key range's records (see `MergeRange`).
        budget: bytes of decoded rows held at once (`merge_budget`).
        key_of: a file's `_MIN_KEY`/`_MAX_KEY` bytes as a comparable key.
    """
    ordered = merge_order(files)
    if not ordered:
        return
    in_order = sequence_disjoint(ordered)
    if any(key_of(f.min_key) > key_of(f.max_key) for f in ordered):
        # Not sorted in the order this merge reads keys: merge everything at once.
        whole = [t for f in ordered for t in read(f, budget)]
        if whole:
            yield merge(pa.concat_tables(whole), in_order)
        return
    batch_bytes = max(budget // (2 * len(ordered)), 1)
    runs = [_Run(read(f, batch_bytes), key_names) for f in ordered]
    # One pool for the whole merge: threads that live as long as it keep their allocator's
    # arenas warm instead of leaving freed memory behind in each round's new threads.
    pool = ThreadPoolExecutor(max_workers=min(cores(), len(runs)))
    try:
        yield from _rounds(runs, merge, in_order, pool)
    finally:
        pool.shutdown(wait=True)
        for run in runs:
            run.close()


def _rounds(runs: list[_Run], merge: MergeRange, in_order: bool,
            pool: ThreadPoolExecutor) -> Iterator[pa.Table]:
    while True:
        # 1. Refill the runs that need rows, several files at once (decoding releases the GIL).
        needing = [r for r in runs if r.needs_rows()]
        if len(needing) == 1:
            needing[0].fill()
        elif needing:
            list(pool.map(_Run.fill, needing))
        live = [r for r in runs if not r.exhausted]
        if not live:
            parts = [r.take_all() for r in runs]
        else:
            # 2. No unread row lies below the smallest last buffered key of a live run.
            bound = min(r.last_key() for r in live)
            for r in live:
                r.at_bound = r.last_key() == bound
            # 3. Everything below the bound is complete: merge it.
            parts = [r.take_below(bound) for r in runs]
        rows = [p for p in parts if p is not None and p.num_rows]
        if rows:
            merged = merge(pa.concat_tables(rows) if len(rows) > 1 else rows[0], in_order)
            if merged.num_rows:
                yield merged
        if not live:
            return


class _Run:
    """One sorted run (file) being merged: its batch stream and the rows buffered from it."""

    def __init__(self, batches: Iterator[pa.Table], key_names: Sequence[str]):
        self.batches = batches
        self.key_names = list(key_names)
        self.buffer: pa.Table | None = None
        self.exhausted = False
        self.at_bound = False
        self.batch_rows = 0  # rows of the last batch read: the refill threshold

    def needs_rows(self) -> bool:
        if self.exhausted:
            return False
        held = 0 if self.buffer is None else self.buffer.num_rows
        # A run whose buffer ends at the last bound holds only that key: it must read on to move.
        return held == 0 or held < self.batch_rows or self.at_bound

    def fill(self) -> None:
        """Read the next non-empty batch (or learn that the file is exhausted)."""
        self.at_bound = False
        for batch in self.batches:
            if batch.num_rows:
                self.batch_rows = batch.num_rows
                self.buffer = batch if self.buffer is None or not self.buffer.num_rows else (
                    pa.concat_tables([self.buffer, batch]))
                return
        self.exhausted = True

    def last_key(self) -> tuple[Any, ...]:
        assert self.buffer is not None and self.buffer.num_rows
        return self._key(self.buffer.num_rows - 1)

    def _key(self, i: int) -> tuple[Any, ...]:
        assert self.buffer is not None
        return tuple(_comparable_cell(self.buffer.column(k), i) for k in self.key_names)

    def take_below(self, bound: tuple[Any, ...]) -> pa.Table | None:
        """Remove and return the buffered rows whose key is below `bound`."""
        if self.buffer is None or not self.buffer.num_rows:
            return None
        n = self.buffer.num_rows
        cut = bisect_left(range(n), bound, key=self._key)
        taken = self.buffer.slice(0, cut)
        self.buffer = self.buffer.slice(cut)
        return taken

    def take_all(self) -> pa.Table | None:
        taken, self.buffer = self.buffer, None
        return taken

    def close(self) -> None:
        close = getattr(self.batches, "close", None)
        if close is not None:
            close()


def _comparable_cell(column: pa.ChunkedArray, i: int) -> Any:
    """Row `i` of a key column as Python compares it in the order files are sorted in."""
    scalar = column[i]
    if pa.types.is_temporal(scalar.type):
        # The stored integer: exact for every unit (as_py would drop nanoseconds).
        return scalar.value
    return comparable(scalar.as_py())
