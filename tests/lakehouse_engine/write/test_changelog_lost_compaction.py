"""Changelogs computed against a stale base, with a writer of the same keys in between. A writer's
compaction at commit that loses to a concurrent compaction of the same files: the data still lands
and what the compaction computed goes, its `full-compaction` changelog too (the compaction's own,
computed against the top level it saw). A `lookup` changelog is the data's: a stale one makes the
whole commit conflict, deletion-vector tables included. Either way the changes replay to the
table and no file is left behind."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CommitConflictError
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


def test_a_dv_tables_lookup_changelog_against_a_stale_base_conflicts(catalog: Catalog) -> None:
    """A DV table's compaction at commit reads the bucket as it is then, but its lookup changelog
    was computed at the flush, against the bucket as the flush found it: when another writer
    committed the key since, the changelog (here: nothing, a delete of an absent key) is stale and
    the commit conflicts, nothing landing, instead of committing a table the changes disagree with."""
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "lookup", "deletion-vectors.enabled": "true",
        "num-sorted-run.compaction-trigger": "2"})  # the compaction at commit takes the other writer's file
    late = _open(t, "a")
    other = _open(t, "b")
    late[0].write_arrow(pa.table({"id": [0], "v": [None], "k": ["-D"]}, schema=SCHEMA))
    messages = late[0].prepare_commit()  # its lookup saw no key 0: no changelog for the delete
    other[1].commit(other[0].prepare_commit())  # +I 0 = b, after that lookup
    before = t.latest_snapshot().id
    with pytest.raises(CommitConflictError, match="changelog"):
        late[1].commit(messages)
    late[1].abort(messages)
    assert t.latest_snapshot().id == before
    changes = change_tuples(t)
    assert replay(changes) == {0: "b"} == {r["id"]: r["v"] for r in read(t).to_pylist()}
    again = _open(t, "x")  # written again, against what landed: -D of b
    again[0].write_arrow(pa.table({"id": [0], "v": [None], "k": ["-D"]}, schema=SCHEMA))
    again[1].commit(again[0].prepare_commit())
    assert [c[1:] for c in change_tuples(t, before)] == [("-D", 0, "b")]
    assert read(t).num_rows == 0


def test_a_dv_tables_lookup_changelog_is_against_the_bucket_as_the_flush_finds_it(catalog: Catalog) -> None:
    """Another writer committed the key after the DV writer's first write but before its flush:
    the flush looks the key up in the bucket as it is then (not as the first write found it), and
    its changelog of the delete (-D b) lands with the data, numbered above the other writer's."""
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "lookup", "deletion-vectors.enabled": "true",
        "num-sorted-run.compaction-trigger": "2"})
    late = _open(t, "a")
    other = _open(t, "b")
    other[1].commit(other[0].prepare_commit())  # +I 0 = b
    before = t.latest_snapshot().id
    late[0].write_arrow(pa.table({"id": [0], "v": [None], "k": ["-D"]}, schema=SCHEMA))
    late[1].commit(late[0].prepare_commit())
    assert [c[1:] for c in change_tuples(t, before)] == [("-D", 0, "b")]
    assert replay(change_tuples(t)) == {} == {r["id"]: r["v"] for r in read(t).to_pylist()}


def test_a_resequenced_write_lands_without_the_full_compaction_changelog_of_its_dropped_compaction(
        catalog: Catalog) -> None:
    """Two writers of the same keys, each compacting fully at commit (`full-compaction.delta-commits`
    = 1): the later one is re-sequenced after the first and its compaction dropped, and with it
    that compaction's changelog; its data lands (before: the whole write conflicted), and the next
    full compaction's changelog brings the changes up to the table."""
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "full-compaction",
        "full-compaction.delta-commits": "1"})
    first, second = _open(t, "a"), _open(t, "b")
    m1, m2 = first[0].prepare_commit(), second[0].prepare_commit()
    first[1].commit(m1)
    ids = second[1].commit(m2)
    assert [t.snapshot(i).commit_kind for i in ids] == ["APPEND"]
    assert {r["id"]: r["v"] for r in read(t).to_pylist()} == {0: "b"}
    t.compact(full=True)
    changes = change_tuples(t)
    assert [c[1:] for c in changes] == [("+I", 0, "a"), ("-U", 0, "a"), ("+U", 0, "b")]
    assert replay(changes) == {0: "b"}
    assert t.remove_orphan_files(older_than=int(time.time() * 1000) + 3_600_000, dry_run=True) == []


@pytest.mark.parametrize("vectors", [False, True], ids=["merge-on-read", "deletion-vectors"])
def test_a_lookup_changelog_against_a_key_deleted_and_compacted_away_since_conflicts(
        catalog: Catalog, vectors: bool) -> None:
    """Found by the writer-process race: the lookup saw key 0 = a and made -U a / +U c; meanwhile
    another writer deleted the key and a compaction dropped the delete at the top level (with
    deletion vectors: marked the row and dropped the delete), so no live file holds the key to
    show the lookup is stale. Every file the bucket gained since the lookup counts, the ones
    compacted away again too: the commit conflicts, and written again the change is +I c."""
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "lookup",
        **({"deletion-vectors.enabled": "true"} if vectors else {})})
    first = _open(t, "a")
    first[1].commit(first[0].prepare_commit())  # +I 0 = a
    late = _open(t, "c")
    messages = late[0].prepare_commit()  # its lookup sees 0 = a: -U a / +U c
    other = _open(t, "b")
    other[0].write_arrow(pa.table({"id": [0], "v": [None], "k": ["-D"]}, schema=SCHEMA))
    other[1].commit(other[0].prepare_commit())  # -D a (b then deleted in the same batch)
    t.compact(full=True)  # the delete reaches the top level: no file holds key 0 now
    before = t.latest_snapshot().id
    with pytest.raises(CommitConflictError, match="changelog"):
        late[1].commit(messages)
    late[1].abort(messages)
    assert t.latest_snapshot().id == before
    again = _open(t, "c")
    again[1].commit(again[0].prepare_commit())
    assert [c[1:] for c in change_tuples(t, before)] == [("+I", 0, "c")]
    assert replay(change_tuples(t)) == {0: "c"} == {r["id"]: r["v"] for r in read(t).to_pylist()}


def test_a_dv_tables_lookup_changelog_lands_when_its_writers_compaction_loses(catalog: Catalog) -> None:
    """Found by the writer-process race: the lookup changelog is right (the other writer wrote
    another key of the bucket), but the writer's compaction at commit computed its vectors before
    the other's commit changed them, so it loses. The changelog goes with it (a level-0 file has
    not given its changelog, as in Paimon), and the committer compacts the bucket again against what
    landed, that compaction giving the changelog of the level 0 it takes up."""
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "lookup", "deletion-vectors.enabled": "true"})
    first = _open(t, "a")
    first[1].commit(first[0].prepare_commit())  # +I 0 = a
    late = _open(t, "c")
    messages = late[0].prepare_commit()  # -U a / +U c, and its vectors, against the bucket now
    wb = t.new_batch_write_builder()
    other = wb.new_write()
    other.write_arrow(pa.table({"id": [1], "v": ["x"], "k": ["+I"]}, schema=SCHEMA))
    wb.new_commit().commit(other.prepare_commit())  # +I 1 = x: the bucket's vectors change
    before = t.latest_snapshot().id
    ids = late[1].commit(messages)
    assert [t.snapshot(i).commit_kind for i in ids] == ["APPEND", "COMPACT"]
    assert [c[1:] for c in change_tuples(t, before)] == [("-U", 0, "a"), ("+U", 0, "c")]
    assert not any(e.file.level == 0 for e in t.store.manifest_io().live_entries(t.latest_snapshot()))
    assert replay(change_tuples(t)) == {0: "c", 1: "x"} == {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert t.remove_orphan_files(older_than=int(time.time() * 1000) + 3_600_000, dry_run=True) == []


def test_a_lookup_writers_lost_compaction_takes_its_changelog_along_and_the_committer_takes_level0_up(
        catalog: Catalog) -> None:
    """Paimon's invariant: a level-0 file a snapshot lists has not given its changelog. The writer's
    compaction would take a write-only writer's level 0 and its own run up, giving both changelogs;
    a dedicated compaction takes the write-only level 0 up first (giving its +I), so the writer's
    loses. Its changelog goes with it (the +I would come twice), its data lands, and the committer
    takes its level 0 up with the changelog against what landed."""
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog-producer": "lookup"})
    first = _open(t, "a")
    # (Many more keys: the compactions move the small level-0 files up without merging this one.)
    first[0].write_arrow(pa.table({"id": list(range(100, 3000)), "v": ["y"] * 2900, "k": ["+I"] * 2900},
                                  schema=SCHEMA))
    first[1].commit(first[0].prepare_commit())  # +I 0 = a
    wb = t.copy({"write-only": "true"}).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"id": [1], "v": ["x"], "k": ["+I"]}, schema=SCHEMA))
    wb.new_commit().commit(w.prepare_commit())  # 1 = x in level 0, no changelog yet
    late = _open(t, "c")
    messages = late[0].prepare_commit()  # its compaction takes 1 = x and 0 = c up
    t.compact()  # +I 1 = x, first
    before = t.latest_snapshot().id
    ids = late[1].commit(messages)
    assert [t.snapshot(i).commit_kind for i in ids] == ["APPEND", "COMPACT"]
    assert [c[1:] for c in change_tuples(t, before)] == [("-U", 0, "a"), ("+U", 0, "c")]
    assert replay(change_tuples(t)) == {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert {0: "c", 1: "x"}.items() <= replay(change_tuples(t)).items()
    assert not any(e.file.level == 0 for e in t.store.manifest_io().live_entries(t.latest_snapshot()))
    assert t.remove_orphan_files(older_than=int(time.time() * 1000) + 3_600_000, dry_run=True) == []
