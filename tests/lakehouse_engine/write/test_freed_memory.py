"""FreedMemory releases the memory pool's unused memory once per budget of rows passed on."""

from __future__ import annotations

import pyarrow as pa

from lakehouse_engine.write.freed_memory import FreedMemory


def test_the_pool_is_released_each_time_a_budget_of_rows_was_rewritten() -> None:
    freed = FreedMemory(100)
    for _ in range(5):
        freed.add(40)  # 120 bytes: released once, then 80 counted towards the next
    assert (freed.releases, freed.since) == (1, 80)
    freed.add(20)
    assert (freed.releases, freed.since) == (2, 0)


def test_a_release_leaves_live_buffers_alone() -> None:
    held = pa.array(range(100_000))
    before = pa.total_allocated_bytes()
    FreedMemory(0).add(1)  # a budget of 0 releases on every call
    assert pa.total_allocated_bytes() == before
    assert held.sum().as_py() == sum(range(100_000))
