"""A first-row `lookup` table's compaction that takes level 0 up gives `+I` only for keys no file
above level 0 of the compaction holds (Paimon's `containsHighLevel`), whatever the rows' sequence
numbers. Writers number their rows apart: a write-only writer that started before another writer's
commit numbers its level-0 rows below rows already above level 0; before, the next compaction took
the lowest level-0 number as where "new" rows start, and gave `+I` again for the other keys of the
files it rewrote (found by the property test of test_flush_staleness.py)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, strict_replay

OPTIONS = {"bucket": "1", "rowkind.field": "k", "merge-engine": "first-row", "changelog-producer": "lookup",
           "ignore-delete": "true"}


def _rows(keys: list[int], v: str) -> pa.Table:
    return pa.table({"id": keys, "v": [v] * len(keys), "k": ["+I"] * len(keys)}, schema=SCHEMA)


def _commit(t: FileStoreTable, keys: list[int], v: str) -> None:
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(_rows(keys, v))
    wb.new_commit().commit(w.prepare_commit())
    w.close()


def _changes(t: FileStoreTable) -> list[tuple[str, Any, Any]]:
    return [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()]


def _write_only_started_before(t: FileStoreTable, keys: list[int], v: str) -> Any:
    """A write-only writer that took the bucket's numbers now (its rows written), to commit later."""
    wb = t.copy({"write-only": "true"}).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(_rows(keys, v))
    return lambda: (wb.new_commit().commit(w.prepare_commit()), w.close())


@pytest.mark.parametrize("later", ["batch writer", "stream writer"])
def test_a_compaction_over_a_write_only_run_numbered_below_the_upper_rows_gives_each_key_once(
        catalog: Catalog, later: str) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options=OPTIONS)
    if later == "stream writer":
        wb = t.new_stream_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(_rows([0], "a"))
        commit_other = _write_only_started_before(t, [1], "b")
        commit_other()  # (numbered from 0, as the stream writer's row)
        c.commit(w.prepare_commit(1), 1)
        w.write_arrow(_rows([0, 2], "c"))
        c.commit(w.prepare_commit(2), 2)  # its compaction takes the write-only run up
        w.close()
    else:
        commit_other = _write_only_started_before(t, [1], "b")
        _commit(t, [0], "a")
        commit_other()
        _commit(t, [0, 2], "c")  # its compaction takes the write-only run up
    rows = {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert rows == {0: "a", 1: "b", 2: "c"}
    # Before: `+I 0 a` twice (the rewritten upper row was taken for a new one).
    assert sorted(_changes(t)) == [("+I", 0, "a"), ("+I", 1, "b"), ("+I", 2, "c")]
    assert strict_replay(_changes(t)) == rows
