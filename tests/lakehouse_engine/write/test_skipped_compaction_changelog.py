"""A `lookup` writer's compaction at commit that is skipped (a file of its levels was replaced by a
dedicated compaction and removed by expiry during the cycle) leaves the cycle's later runs in level
0; their flush changelog must then stay out of the commit, even when an earlier compaction of the
same cycle (the stop trigger's) lands: Paimon's invariant, a level-0 file a snapshot lists has not
given its changelog yet, and the compaction that takes it up gives it. Else that compaction gives
it a second time."""

from __future__ import annotations

import logging
from collections import Counter

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, replay


def _rows(keys: range, v: str) -> pa.Table:
    keys = list(keys)
    return pa.table({"id": keys, "v": [v] * len(keys), "k": ["+I"] * len(keys)}, schema=SCHEMA)


def _commit(t: FileStoreTable, keys: range, v: str) -> None:
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(_rows(keys, v))
    wb.new_commit().commit(w.prepare_commit())
    w.close()


def _live_levels(t: FileStoreTable) -> list[int]:
    return sorted(e.file.level for e in t.store.manifest_io().live_entries(t.latest_snapshot()))


def test_the_runs_a_skipped_compaction_left_in_level0_give_their_changelog_once(
        catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "lookup",
        "num-sorted-run.compaction-trigger": "3", "num-sorted-run.stop-trigger": "5",
        "write-buffer-size": "1 kb"})
    # Two large files: the size ratio leaves them out of the stop trigger's compaction.
    _commit(t, range(0, 100_000), "a")
    _commit(t, range(0, 30_000), "b")
    assert len(_live_levels(t)) == 2 and 0 not in _live_levels(t)
    # (Its compaction at commit is a full one: it reads the files the dedicated one replaces.)
    wb = t.copy({"full-compaction.delta-commits": "1"}).new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    # Three runs of keys above the table's (a flush each): with its two files, the stop trigger
    # compacts the three runs.
    for i in range(3):
        w.write_arrow(_rows(range(200_000 + 1000 * i, 200_100 + 1000 * i), f"r{i}"))
    # Meanwhile a dedicated compaction replaces the table's two files, and expiry removes them.
    t.compact(full=True)
    t.expire_snapshots(retain_max=1, retain_min=1)
    w.write_arrow(_rows(range(300_000, 300_100), "r3"))  # (its lookup reads no file: no key in their range)
    with caplog.at_level(logging.WARNING):
        messages = w.prepare_commit(1)  # its full compaction reads a removed file: skipped
    assert "skipping the writer's compaction" in caplog.text
    assert any(m.compact_before for m in messages)  # (the stop trigger's compaction)
    start = t.latest_snapshot().id
    c.commit(messages, 1)
    assert 0 in _live_levels(t)  # the last run stays in level 0 ...
    t.compact(full=True)  # ... until a compaction takes it up, with its changelog
    changes = change_tuples(t, start)  # (the keys this writer added)
    twice = {k: n for k, n in Counter(ch[2] for ch in changes).items() if n > 1}
    assert not twice, f"keys whose +I came twice: {sorted(twice)[:5]}"
    assert replay(changes) == {r["id"]: r["v"] for r in read(t).to_pylist() if r["id"] >= 200_000}
