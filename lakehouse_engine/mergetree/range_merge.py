"""One merge of a bucket's sorted runs, key range by key range, in memory bounded by an option.

Every path that merges a bucket's files (merge-on-read, writer and dedicated compaction, rescale,
the Spark tasks) merges them here. Each file is a sorted run read as a stream of batches (parquet
and Avro a share of half of `sort-spill-buffer-size` by file size, in decoded bytes, at a time;
ORC a stripe at a time; see `batch_budgets`).
The merge proceeds in rounds:

1. Every file whose buffered rows ran low (or whose buffer ends at the last round's bound) takes
   its next batch, read ahead on the merge's threads while the previous range merged and was
   written; then each file starts reading its next batch ahead.
2. The bound of the round is the smallest last buffered key among the files not yet exhausted:
   no row still unread can have a key below it, because each file is sorted.
3. The rows of every file with keys below the bound (a binary search per buffer) are taken out,
   concatenated in merge order (`merge_order`: oldest file first) and merged by the table's
   merge function; the merged range is yielded.

Each range holds every record of its keys and records stand in the one merge order, so the
ranges concatenated are exactly the merge of the whole section, ties by sequence number
included, for every merge engine. Memory is about three times the option (buffers and the
batches read ahead, the round's rows, the merged range; a compaction also holds the range being
written), whatever the bucket's size. A section holding a file whose first key
lies above its last in Java's order (pypaimon's NaN-first files) is not sorted as the merge
reads it: it is merged whole, as before.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse_engine.format.float_order import comparable
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.lookup_merge import row_levels
from lakehouse_engine.mergetree.merge_order import merge_order, sequence_disjoint
from lakehouse_engine.options import SORT_SPILL_BUFFER_SIZE, CoreOptions
from lakehouse_engine.threads import cores

__all__ = ["Candidates", "FileBatches", "batch_budgets", "merge_budget", "range_merge"]

#: Reads one data file as batches of about the given decoded bytes each.
FileBatches = Callable[[DataFileMeta, int], Iterator[pa.Table]]
#: Merges the records of some keys (rows in merge order; True: file order is sequence order).
MergeRange = Callable[[pa.Table, bool], pa.Table]
#: The records of some keys a merge takes, given per row its file's level (and
#: True: file order is sequence order): `MergeFunction.lookup_candidates`.
Candidates = Callable[[pa.Table, np.ndarray, bool], pa.Table]


def merge_budget(options: CoreOptions) -> int:
    """The bytes of decoded rows one merge may hold at once (`sort-spill-buffer-size`)."""
    return int(options.require(SORT_SPILL_BUFFER_SIZE))


def range_merge(files: Sequence[DataFileMeta], read: FileBatches, key_names: Sequence[str],
                merge: MergeRange, budget: int,
                key_of: Callable[[bytes], tuple[Any, ...]],
                threads: int | None = None, candidates: Candidates | None = None) -> Iterator[pa.Table]:
    """The merge of `files` (one bucket's, any overlap), yielded as merged key ranges in key order.

    Args:
        files: the files to merge; they are read in merge order.
        read: reads one file as batches of about the given bytes (see `FileBatches`).
        key_names: the key columns (they are among the columns `read` returns).
        merge: merges one key range's records (see `MergeRange`).
        budget: bytes of decoded rows held at once (`merge_budget`).
        key_of: a file's `_MIN_KEY`/`_MAX_KEY` bytes as a comparable key.
        threads: threads reading files (ahead) at once, default one per core; 1 reads each batch
            when it is needed, in the caller's thread (a caller merging several buckets at once).
        candidates: a table that needs lookups: the records each range's merge takes, given
            each one's file level (Paimon's LookupMergeFunction).
    """
    ordered = merge_order(files)
    if not ordered:
        return
    in_order = sequence_disjoint(ordered)
    if any(key_of(f.min_key) > key_of(f.max_key) for f in ordered):
        # Not sorted in the order this merge reads keys: merge everything at once.
        whole = [(t, f.level) for f in ordered for t in read(f, budget)]
        if whole:
            yield merge(_candidates([t for t, _ in whole], [lvl for _, lvl in whole], in_order, candidates),
                        in_order)
        return
    runs = [_Run(read(f, size), key_names, f.row_count, f.level)
            for f, size in zip(ordered, batch_budgets(ordered, budget), strict=True)]
    # One pool for the whole merge: threads that live as long as it keep their allocator's
    # arenas warm instead of leaving freed memory behind in each round's new threads.
    workers = min(threads or cores(), len(runs))
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
    try:
        yield from _rounds(runs, merge, in_order, pool, candidates)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        for run in runs:
            run.close()


def batch_budgets(files: Sequence[DataFileMeta], budget: int) -> list[int]:
    """The decoded bytes each file is read in, per batch: half the budget, shared by file size.

    A file's share follows its size, so batches of uniformly spread keys cover about the same key
    span in every file (few rows wait for the next round), and a section that fits in half the
    budget reads every file in one batch: one round, one merge. Each file gets at least a quarter
    of an equal share, so a small file among large ones still reads in batches of some size.
    """
    half = max(budget // 2, 1)
    total = sum(max(f.file_size, 1) for f in files)
    floor = max(half // (4 * len(files)), 1)
    return [max(half * max(f.file_size, 1) // total, floor) for f in files]


def _candidates(parts: list[pa.Table], levels: list[int], in_order: bool,
                candidates: Candidates | None) -> pa.Table:
    """The parts (read from files at `levels`) concatenated, as `candidates` keeps them."""
    rows = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if candidates is None:
        return rows
    return candidates(rows, row_levels([p.num_rows for p in parts], levels), in_order)


def _rounds(runs: list[_Run], merge: MergeRange, in_order: bool,
            pool: ThreadPoolExecutor | None, candidates: Candidates | None) -> Iterator[pa.Table]:
    for r in runs:
        r.read_ahead(pool)
    while True:
        # 1. Refill the runs that need rows from the batches read ahead, then read the next ones
        #    ahead (decoding releases the GIL: it runs while this range merges and is written).
        for r in runs:
            if r.needs_rows():
                r.fill()
        for r in runs:
            r.read_ahead(pool)
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
        taken = [(p, r.level) for p, r in zip(parts, runs, strict=True) if p is not None and p.num_rows]
        if taken:
            merged = merge(_candidates([p for p, _ in taken], [lvl for _, lvl in taken], in_order, candidates),
                           in_order)
            if merged.num_rows:
                yield merged
        if not live:
            return


class _Run:
    """One sorted run (file) being merged: its batch stream, the rows buffered from it and the
    next batch, read ahead on the merge's threads."""

    def __init__(self, batches: Iterator[pa.Table], key_names: Sequence[str], row_count: int, level: int):
        self.batches = batches
        self.level = level  # the file's level
        self.key_names = list(key_names)
        self.row_count = row_count  # the file's rows, as its manifest entry says
        self.rows_read = 0
        self.buffer: pa.Table | None = None
        self.exhausted = False  # the stream has ended (rows may still be buffered)
        self.at_bound = False
        self.batch_rows = 0  # rows of the last batch read: the refill threshold
        self._ahead: Future[tuple[pa.Table | None, bool]] | None = None
        self._ended = False  # the stream's end has been read

    def needs_rows(self) -> bool:
        if self.exhausted:
            return False
        held = 0 if self.buffer is None else self.buffer.num_rows
        # A run whose buffer ends at the last bound holds only that key: it must read on to move.
        return held == 0 or held < self.batch_rows or self.at_bound

    def read_ahead(self, pool: ThreadPoolExecutor | None) -> None:
        """Start reading the next batch, unless one is being read or the stream has ended (or
        there is no pool: then `fill` reads it)."""
        if pool is not None and self._ahead is None and not self._ended:
            self._ahead = pool.submit(self._next)

    def _next(self) -> tuple[pa.Table | None, bool]:
        """The next non-empty batch (None: none is left) and whether the stream has ended."""
        for batch in self.batches:
            if batch.num_rows:
                self.rows_read += batch.num_rows
                if self.rows_read >= self.row_count:
                    # The file's last rows: end the stream now (it runs its end-of-file checks
                    # and stops), so a section read whole merges in one round, not two.
                    rest = [b for b in self.batches if b.num_rows]  # none, unless the count is wrong
                    return (pa.concat_tables([batch, *rest]) if rest else batch), True
                return batch, False
        return None, True

    def fill(self) -> None:
        """Take the batch read ahead (reading it now if none is) into the buffer."""
        self.at_bound = False
        ahead, self._ahead = self._ahead, None
        batch, ended = ahead.result() if ahead is not None else self._next()
        self._ended = self._ended or ended
        if batch is not None:
            self.batch_rows = batch.num_rows
            self.buffer = batch if self.buffer is None or not self.buffer.num_rows else (
                pa.concat_tables([self.buffer, batch]))
        self.exhausted = ended

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
