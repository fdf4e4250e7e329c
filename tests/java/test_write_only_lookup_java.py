"""A `write-only` writer of our `lookup` table leaves its rows in level 0 and writes no changelog, as
Paimon's does: the compaction that takes them up gives it (Paimon's LookupMergeTreeCompactRewriter).
Paimon 0.9 (Java) judges both halves: its compaction of our write-only level 0 gives each change
once, and its stream started at our write-only commit (its first plan skips level 0) receives those
rows from our compaction's changelog. A key in two write-only commits gives one change in Java's
compaction and in ours, the same changes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.java.conftest import Judge, ok
from tests.java.test_changes_java import _java
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
#: What a stream from the start reads: the first commit, then the write-only commit's changes.
CHANGES = [("+I", 1, "a"), ("+I", 2, "b"), ("-U", 1, "a"), ("+U", 1, "a2"), ("+I", 3, "c")]


def _write_only_after_a_write(tmp_path: Any) -> tuple[Any, Any]:
    warehouse = tmp_path / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "changelog-producer": "lookup"})
    write(t, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    write(t.copy({"write-only": "true"}), pa.table({"id": [1, 3], "v": ["a2", "c"]}, schema=SCHEMA))
    return warehouse, t


def test_a_java_compaction_after_our_write_only_commit_gives_no_change_twice(tmp_path: Any, judge: Judge) -> None:
    warehouse, t = _write_only_after_a_write(tmp_path)
    assert t.latest_snapshot().changelog_manifest_list is None  # the write-only commit gave none
    compacted, stream = judge([
        {"op": "compact", "warehouse": str(warehouse), "table": "db.t", "full": False},
        {"op": "stream", "warehouse": str(warehouse), "table": "db.t",
         "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}}])
    ok(compacted)
    changes = [tuple(row) for _, rows in _java(stream) for row in rows]
    assert sorted(changes) == sorted(CHANGES)


def test_a_java_stream_starting_at_our_write_only_commit_receives_its_rows_from_our_compaction(
        tmp_path: Any, judge: Judge) -> None:
    warehouse, t = _write_only_after_a_write(tmp_path)
    window = t.latest_snapshot().id  # between the write-only commit and the compaction
    t.compact()
    (stream,) = judge([{"op": "stream", "warehouse": str(warehouse), "table": "db.t",
                        "options": {"scan.mode": "from-snapshot-full", "scan.snapshot-id": str(window)}}])
    plans = _java(stream)
    # Its first plan: the rows above level 0 (the first commit's); then our compaction's changelog.
    assert [tuple(r) for r in plans[0][1]] == [("+I", 1, "a"), ("+I", 2, "b")]
    assert sorted(tuple(r) for _, rows in plans for r in rows) == sorted(CHANGES)


def _two_write_only_commits(warehouse: Any) -> Any:
    """A normal commit, then two write-only commits of the same keys (two level-0 files)."""
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "changelog-producer": "lookup"})
    write(t, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    write_only = t.copy({"write-only": "true"})
    write(write_only, pa.table({"id": [1, 3], "v": ["a2", "c"]}, schema=SCHEMA))
    write(write_only, pa.table({"id": [1, 3, 4], "v": ["a3", "c2", "d"]}, schema=SCHEMA))
    return t


def test_a_key_in_two_write_only_commits_gives_one_change_in_javas_compaction_and_in_ours(
        tmp_path: Any, judge: Judge) -> None:
    """Paimon's compaction merges a key's level-0 records from both commits with its row above
    level 0 (LookupChangelogMergeFunctionWrapper): one change per key. Ours, of the same inputs,
    gives the same changes."""
    theirs, ours = _two_write_only_commits(tmp_path / "java"), _two_write_only_commits(tmp_path / "ours")
    window = ours.latest_snapshot().id  # the last write-only commit: the compaction comes after
    ours.compact()
    compacted, *streams = judge([
        {"op": "compact", "warehouse": str(tmp_path / "java"), "table": "db.t", "full": False},
        *[{"op": "stream", "warehouse": str(tmp_path / w), "table": "db.t",
           "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": str(window + 1)}} for w in ("java", "ours")]])
    ok(compacted)
    assert theirs.snapshot(window + 1).commit_kind == "COMPACT"
    one_change = [("-U", 1, "a"), ("+U", 1, "a3"), ("+I", 3, "c2"), ("+I", 4, "d")]
    # The compaction's changelog, as Java streams it from each table and as we read it.
    for stream in streams:
        assert sorted(tuple(r) for _, rows in _java(stream) for r in rows) == sorted(one_change)
    for t in (theirs, ours):
        assert [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(window).to_pylist()] == one_change


def test_a_normal_commit_after_a_write_only_commit_gives_one_change_per_key_in_javas_write_and_in_ours(
        tmp_path: Any, judge: Judge) -> None:
    """A normal writer's commit of keys our write-only commit left in level 0: Paimon's writer
    takes that level 0 and its own run up in its compaction at commit (lookup-wait), one change per
    key; ours gives the same changes (not the level 0's change and then the run's)."""
    tables = {name: _write_only_after_a_write(tmp_path / name) for name in ("java", "ours")}
    window = tables["ours"][1].latest_snapshot().id  # the write-only commit
    write(tables["ours"][1], pa.table({"id": [1, 3, 4], "v": ["a3", "c2", "d"]}, schema=SCHEMA))
    written, *streams = judge([
        {"op": "write", "warehouse": str(tables["java"][0]), "table": "db.t",
         "rows": [["+I", 1, "a3"], ["+I", 3, "c2"], ["+I", 4, "d"]]},
        *[{"op": "stream", "warehouse": str(tables[w][0]), "table": "db.t",
           "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": str(window + 1)}} for w in ("java", "ours")]])
    ok(written)
    one_change = [("-U", 1, "a"), ("+U", 1, "a3"), ("+I", 3, "c2"), ("+I", 4, "d")]
    for stream in streams:
        assert sorted(tuple(r) for _, rows in _java(stream) for r in rows) == sorted(one_change)
    for _, t in tables.values():
        assert [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(window).to_pylist()] == one_change
