"""A `lookup` writer's compaction at commit that is skipped (a file of its levels was replaced by a
dedicated compaction and removed by expiry during the cycle) leaves the cycle's later runs in level
0; their flush changelog must then stay out of the commit, even when an earlier compaction of the
same cycle (the stop trigger's) lands: Paimon's invariant, a level-0 file a snapshot lists has not
given its changelog yet, and the compaction that takes it up gives it. Else that compaction gives
it a second time."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

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


def _writer_after_a_stop_trigger_compaction(t: FileStoreTable) -> tuple[Any, Any]:
    """A stream writer (its compaction at commit a full one) whose three runs the stop trigger
    compacted, leaving the table's two large files alone."""
    # (Its compaction at commit is a full one: it reads the table's files.)
    wb = t.copy({"full-compaction.delta-commits": "1"}).new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    # Three runs of keys above the table's (a flush each): with the table's two files, the stop
    # trigger compacts the three runs (the size ratio leaves the large files out).
    for i in range(3):
        w.write_arrow(_rows(range(200_000 + 1000 * i, 200_100 + 1000 * i), f"r{i}"))
    return w, c


def _table(catalog: Catalog) -> FileStoreTable:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "lookup",
        "num-sorted-run.compaction-trigger": "3", "num-sorted-run.stop-trigger": "5",
        "write-buffer-size": "1 kb"})
    _commit(t, range(0, 100_000), "a")
    _commit(t, range(0, 30_000), "b")
    assert len(_live_levels(t)) == 2 and 0 not in _live_levels(t)
    return t


def test_the_runs_a_skipped_compaction_left_in_level0_give_their_changelog_once(
        catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    """A file the table lists is missing from storage: the full compaction at commit is skipped."""
    t = _table(catalog)
    w, c = _writer_after_a_stop_trigger_compaction(t)
    large = max(t.store.manifest_io().live_entries(t.latest_snapshot()), key=lambda e: e.file.row_count).file
    t.store.file_io.delete_file(f"{t.store.path_factory.bucket_dir([], 0)}/{large.file_name}")
    w.write_arrow(_rows(range(300_000, 300_100), "r3"))  # (its lookup reads no file: no key in their range)
    with caplog.at_level(logging.WARNING):
        messages = w.prepare_commit(1)  # its full compaction reads the missing file: skipped
    assert "skipping the writer's compaction" in caplog.text
    assert any(m.compact_before for m in messages)  # (the stop trigger's compaction)
    start = t.latest_snapshot().id
    c.commit(messages, 1)
    assert 0 in _live_levels(t)  # the last run stays in level 0 ...
    t.compact()  # ... until a compaction takes it up, with its changelog (not reading the missing file)
    changes = change_tuples(t, start)
    twice = {k: n for k, n in Counter(ch[2] for ch in changes).items() if n > 1}
    assert not twice, f"keys whose +I came twice: {sorted(twice)[:5]}"
    expected = {k: f"r{i}" for i in range(3) for k in range(200_000 + 1000 * i, 200_100 + 1000 * i)}
    assert 0 not in _live_levels(t)
    assert replay(changes) == {**expected, **{k: "r3" for k in range(300_000, 300_100)}}


def test_a_compaction_at_commit_whose_files_a_dedicated_compaction_replaced_compacts_the_latest(
        catalog: Catalog) -> None:
    """The table's files are replaced by a dedicated compaction and removed by expiry during the
    cycle: the compaction at commit takes the writer's levels from the table and runs (before: it
    was skipped, and the last run's changelog came twice)."""
    t = _table(catalog)
    w, c = _writer_after_a_stop_trigger_compaction(t)
    t.compact(full=True)
    t.expire_snapshots(retain_max=1, retain_min=1)
    w.write_arrow(_rows(range(300_000, 300_100), "r3"))
    start = t.latest_snapshot().id
    c.commit(w.prepare_commit(1), 1)
    assert _live_levels(t) == [t.store.schema.core_options.num_levels - 1]  # (fully compacted)
    changes = change_tuples(t, start)
    assert sorted(Counter(ch[2] for ch in changes).values()) == [1] * 400
    assert replay(changes) == {r["id"]: r["v"] for r in read(t).to_pylist() if r["id"] >= 200_000}
