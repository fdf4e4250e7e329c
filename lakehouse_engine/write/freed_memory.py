"""Handing the memory pyarrow's allocator keeps after frees back to the OS, as a rewrite goes.

A rewrite of a partition through the writer (rescale, the move of postponed rows into buckets)
frees every batch it read and every buffer it flushed, but pyarrow's default allocator
(mimalloc) returns freed pages to the OS only about a second later and keeps them in the heap of
the thread that allocated them: a short rewrite's resident memory grew to three times what it
held at once (its pool's `max_memory()`). Released once per merge budget of rows, it stays near
what is live, for a few per cent more CPU (the pages are touched again when reused).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["FreedMemory"]


class FreedMemory:
    """Counts the bytes of rows a rewrite has passed on (and so freed), and releases the memory
    pool's unused memory each time `every` more bytes were (`sort-spill-buffer-size`)."""

    def __init__(self, every: int):
        self.every = max(every, 1)
        self.since = 0
        self.releases = 0

    def add(self, nbytes: int) -> None:
        """Count `nbytes` more bytes rewritten; release when `every` bytes were since the last."""
        self.since += nbytes
        if self.since >= self.every:
            self.since = 0
            self.releases += 1
            pa.default_memory_pool().release_unused()
