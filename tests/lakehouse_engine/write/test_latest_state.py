"""A deletion-vector writer's commit reads the table's state once, at its flush lookup: the lookup's
staleness base and the compaction at commit reuse it when no snapshot landed since (before: two more
reads, each of the snapshot and its manifests), and the compaction reads it again when one did: the
other writer's rows are then compacted with its own."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.write import bucket_router
from lakehouse_engine.write.bucket_router import RestoredState
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, strict_replay


def _rows(keys: list[int], v: str) -> pa.Table:
    return pa.table({"id": keys, "v": [v] * len(keys), "k": ["+I"] * len(keys)}, schema=SCHEMA)


@pytest.fixture
def state_reads(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The latest snapshot id of every RestoredState read, in order."""
    reads: list[int | None] = []
    real = RestoredState.read

    def counted(table: Any) -> RestoredState:
        state = real(table)
        reads.append(state.latest_snapshot_id)
        return state

    monkeypatch.setattr(bucket_router.RestoredState, "read", staticmethod(counted))
    return reads


def _dv_table(catalog: Catalog) -> Any:
    return create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "deletion-vectors.enabled": "true", "changelog-producer": "lookup"})


def test_a_dv_writers_commit_reads_the_table_state_once_when_nothing_landed_since_its_flush(
        catalog: Catalog, state_reads: list[int | None]) -> None:
    t = _dv_table(catalog)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(list(range(10)), "a"))
    c.commit(w.prepare_commit(1), 1)
    state_reads.clear()
    w.write_arrow(_rows([1, 2, 20], "b"))
    assert len(state_reads) == 1  # (the cycle's write: where its rows go, the read-ahead's files)
    state_reads.clear()
    messages = w.prepare_commit(2)
    # The flush lookup's, once, reused by its staleness base and by the compaction at commit (before:
    # three reads, each of the snapshot and its manifests).
    assert len(state_reads) == 1, state_reads
    c.commit(messages, 2)
    w.close()
    rows = {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert rows == {**{k: "a" for k in range(10)}, 1: "b", 2: "b", 20: "b"}
    assert strict_replay((r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()) == rows


def test_a_dv_writers_commit_reads_the_table_again_when_another_writer_landed_after_its_flush(
        catalog: Catalog, state_reads: list[int | None]) -> None:
    t = _dv_table(catalog)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(list(range(10)), "a"))
    c.commit(w.prepare_commit(1), 1)
    w.write_arrow(_rows([1, 20], "b"))
    w._flush_all(list(w._writers.values()))  # (the flush lookup reads the table)
    other = t.new_batch_write_builder()
    ow = other.new_write()
    ow.write_arrow(_rows([5, 30], "o"))
    other.new_commit().commit(ow.prepare_commit())
    ow.close()
    state_reads.clear()
    messages = w.prepare_commit(2)
    assert state_reads == [t.latest_snapshot().id], state_reads  # (read again: a snapshot landed)
    c.commit(messages, 2)
    w.close()
    rows = {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert rows == {**{k: "a" for k in range(10)}, 1: "b", 20: "b", 5: "o", 30: "o"}
    t.compact(full=True)
    assert strict_replay((r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()) == rows
