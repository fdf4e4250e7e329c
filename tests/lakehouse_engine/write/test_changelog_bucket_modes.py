"""Changelog producers on postpone-bucket and cross-partition tables, as Paimon makes them.

* Postpone (`bucket` = -2): a write only parks rows in `bucket-postpone/` and makes no changelog;
  postpone compaction brings them into the buckets with the table's producer, and the changelog
  (input: the moved records; lookup: against the bucket's rows) lands in its COMPACT snapshot.
  `full-compaction` makes it at the next full compaction.
* Cross-partition (`bucket` = -1, a key without every partition field): a key moving partitions
  is a `-D` in the old partition and an insert in the new one.
Either way the changes replayed in snapshot order give the table.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, put

BATCHES = [
    [(1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I")],
    [(1, "a2", "+I"), (2, None, "-D"), (4, "d", "+I"), (9, None, "-D")],
    [(4, "d2", "+I"), (4, "d3", "+I"), (1, None, "-D"), (5, "e", "+I")],
]


def _replay(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[tuple[Any, ...], Any]:
    state: dict[tuple[Any, ...], Any] = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        if r["_row_kind"] in ("+I", "+U"):
            state[k] = r["v"]
        else:
            state.pop(k, None)
    return state


def _snapshot_kinds(t: FileStoreTable) -> dict[int, tuple[str, bool]]:
    return {s.id: (s.commit_kind, bool(s.changelog_manifest_list)) for s in t.snapshots()}


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_postpone_compaction_makes_the_changelog_of_the_rows_it_brings(catalog: Catalog, producer: str) -> None:
    t = create_table(catalog, "p", SCHEMA, primary_keys=["id"],
                     options={"bucket": "-2", "rowkind.field": "k", "changelog-producer": producer,
                              "postpone.default-bucket-num": "2"})
    written, compacted = [], []
    for batch in BATCHES:
        written.append(put(t, *batch))
        compacted += t.compact_postpone()
        if producer == "full-compaction":
            compacted += t.compact(full=True)
    kinds = _snapshot_kinds(t)
    assert all(not kinds[s][1] for s in written)  # rows waiting in bucket-postpone: no changelog
    assert any(kinds[s] == ("COMPACT", True) for s in compacted)
    changes = t.changes(0).to_pylist()
    assert {r["_snapshot_id"] for r in changes} <= set(compacted)
    table = {(r["id"],): r["v"] for r in read(t).to_pylist()}
    assert table == {(3,): "c", (4,): "d3", (5,): "e"}
    assert _replay(changes, ("id",)) == table
    if producer == "input":  # the records the compaction moved, kinds as written
        assert {(r["_row_kind"], r["id"]) for r in changes if r["_snapshot_id"] == compacted[1]} == {
            ("+I", 1), ("-D", 2), ("+I", 4), ("-D", 9)}
    if producer == "lookup":  # against the bucket's rows: an update is -U/+U, no -D of an absent key
        assert sorted((r["_row_kind"], r["id"]) for r in changes if r["_snapshot_id"] == compacted[1]) == sorted([
            ("-U", 1), ("+U", 1), ("-D", 2), ("+I", 4)])
    # A streaming read from the start sees the same changes, plan by plan.
    scan = t.copy({"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}).new_stream_read_builder()
    stream, reader = scan.with_include_row_kind().new_streaming_scan(), scan.new_read()
    streamed = []
    for _ in range(len(t.snapshots())):
        plan = stream.plan()
        streamed += reader.to_arrow(plan.splits()).to_pylist()
    assert _replay(streamed, ("id",)) == table


CROSS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                   pa.field("v", pa.string()), pa.field("k", pa.string())])


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_a_key_moving_partitions_is_a_delete_in_the_old_and_an_insert_in_the_new(
        catalog: Catalog, producer: str) -> None:
    t = create_table(catalog, "x", CROSS, primary_keys=["id"], partition_keys=["p"],
                     options={"bucket": "-1", "rowkind.field": "k", "changelog-producer": producer})

    def put_rows(*rows: tuple[int, str, str | None, str]) -> None:
        write(t, pa.Table.from_pylist([{"id": i, "p": p, "v": v, "k": k} for i, p, v, k in rows], schema=CROSS))
        if producer == "full-compaction":
            t.compact(full=True)

    put_rows((1, "x", "a", "+I"), (2, "x", "b", "+I"), (3, "y", "c", "+I"))
    start = t.latest_snapshot().id
    put_rows((1, "y", "a2", "+I"), (2, "x", "b2", "+I"))   # 1 moves x -> y; 2 stays in x
    moved = [r for r in t.changes(start).to_pylist() if r["id"] == 1]
    kinds = sorted((r["_row_kind"], r["p"]) for r in moved)
    assert kinds == [("+I", "y"), ("-D", "x")]
    if producer != "input":  # computed against the table: the old partition's row goes
        assert [r["v"] for r in moved if r["_row_kind"] == "-D"] == ["a"]
    put_rows((3, "x", "c2", "+I"), (2, "y", None, "-D"))   # 3 moves back; 2's delete follows it to x
    table = {(r["p"], r["id"]): r["v"] for r in read(t).to_pylist()}
    assert table == {("y", 1): "a2", ("x", 3): "c2"}
    assert _replay(t.changes(0).to_pylist(), ("p", "id")) == table
