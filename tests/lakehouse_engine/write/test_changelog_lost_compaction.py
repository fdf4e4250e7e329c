"""A writer's compaction at commit that loses to a concurrent compaction of the same files: the
data still lands and what the compaction computed goes, its `full-compaction` changelog too (the
compaction's own, computed against the top level it saw, not the one that landed). The changes
replay to the table and no file is left behind. (A `lookup` changelog is the data's: a stale one
makes the whole commit conflict, tests/lakehouse_engine/read/test_changes_property.py.)"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, replay


def _open(table: Any, v: str) -> tuple[Any, Any]:
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"id": [0], "v": [v], "k": ["+I"]}, schema=SCHEMA))
    return w, wb.new_commit()


def test_a_full_compaction_changelog_goes_with_the_compaction_that_lost(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "full-compaction",
        "num-sorted-run.compaction-trigger": "2"})
    first, second = _open(t, "a"), _open(t, "b")
    first[1].commit(first[0].prepare_commit())
    second[1].commit(second[0].prepare_commit())  # restored before the first: no compaction
    late = _open(t, "c")  # its writer sees the two level-0 files
    t.compact()  # a dedicated compaction merges them into the top level first: +I b
    ids = late[1].commit(late[0].prepare_commit())  # its compaction of the same files loses
    assert [t.snapshot(i).commit_kind for i in ids] == ["APPEND"]
    t.compact(full=True)
    changes = change_tuples(t)
    # Two full compactions' differences: +I b, then -U b / +U c; no +I of a key already there.
    assert [c[1:] for c in changes] == [("+I", 0, "b"), ("-U", 0, "b"), ("+U", 0, "c")]
    assert replay(changes) == {0: "c"} == {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert t.remove_orphan_files(older_than=int(time.time() * 1000) + 3_600_000, dry_run=True) == []
