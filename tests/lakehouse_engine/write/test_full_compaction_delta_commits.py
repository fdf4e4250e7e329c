"""`full-compaction.delta-commits` = N, as Paimon's writers apply it (isFullCompactedIdentifier):
a stream writer compacts fully at each commit whose identifier is a multiple of N, and a batch
commit (identifier Long.MAX_VALUE) always does; with the `full-compaction` producer, those are the
commits that carry a changelog. The `compacted-full` start finds the same compactions."""

from __future__ import annotations

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, keyed_table, replay


def _rows(*rows: tuple[int, str]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows], "k": ["+I"] * len(rows)},
                    schema=SCHEMA)


def _table_rows(table) -> dict[int, str]:  # type: ignore[no-untyped-def]
    rb = table.new_read_builder()
    return {r["id"]: r["v"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()}


def test_a_stream_writer_compacts_fully_at_identifiers_that_are_multiples_of_n(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    kinds = []
    for ident in range(1, 6):
        w.write_arrow(_rows((0, f"v{ident}"), (ident, "x")))
        kinds.append([t.snapshot(s).commit_kind for s in c.commit(w.prepare_commit(ident), ident)])
    assert kinds == [["APPEND"], ["APPEND", "COMPACT"], ["APPEND"], ["APPEND", "COMPACT"], ["APPEND"]]
    with_changelog = [t.snapshot(s).commit_identifier for s in range(1, 8) if t.snapshot(s).changelog_manifest_list]
    assert with_changelog == [2, 4]
    changes = change_tuples(t)
    assert replay(changes) == {0: "v4", 1: "x", 2: "x", 3: "x", 4: "x"}
    scan = t.copy({"scan.mode": "compacted-full"}).new_stream_read_builder().new_streaming_scan()
    assert scan.plan().snapshot_id == 6  # identifier 4's full compaction


def test_every_batch_commit_compacts_fully(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "3"})
    for i in range(3):
        wb = t.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(_rows((0, f"v{i}"), (i + 1, "x")))
        assert [t.snapshot(s).commit_kind for s in c.commit(w.prepare_commit())] == ["APPEND", "COMPACT"]
    changes = change_tuples(t)
    assert [c[1:] for c in changes if c[2] == 0] == [("+I", 0, "v0"), ("-U", 0, "v0"), ("+U", 0, "v1"),
                                                     ("-U", 0, "v1"), ("+U", 0, "v2")]
    assert replay(changes) == _table_rows(t)


def test_a_stream_writer_of_a_full_compaction_table_compacts_fully_at_every_commit_when_unset(
        catalog: Catalog) -> None:
    """Paimon's Flink sink: `changelog-producer` = full-compaction with no delta-commits is a full
    compaction at every checkpoint (max(-1, 1) = 1), so each stream commit carries its changelog."""
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction"})
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    kinds = []
    for ident in range(1, 4):
        w.write_arrow(_rows((0, f"v{ident}"), (ident, "x")))
        kinds.append([t.snapshot(s).commit_kind for s in c.commit(w.prepare_commit(ident), ident)])
    assert kinds == [["APPEND", "COMPACT"]] * 3
    with_changelog = [t.snapshot(s).commit_identifier for s in range(1, 7) if t.snapshot(s).changelog_manifest_list]
    assert with_changelog == [1, 2, 3]
    changes = change_tuples(t)
    assert [ch[1:] for ch in changes if ch[2] == 0] == [("+I", 0, "v1"), ("-U", 0, "v1"), ("+U", 0, "v2"),
                                                        ("-U", 0, "v2"), ("+U", 0, "v3")]
    assert replay(changes) == _table_rows(t) == {0: "v3", 1: "x", 2: "x", 3: "x"}


def test_a_batch_writer_of_a_full_compaction_table_does_not_compact_fully_when_unset(catalog: Catalog) -> None:
    """As Paimon's Spark batch write (no GlobalFullCompactionSinkWrite): without delta-commits a
    batch commit compacts as usual, and the changelog waits for a full compaction."""
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction"})
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows((0, "v0"), (1, "x")))
    assert [t.snapshot(s).commit_kind for s in c.commit(w.prepare_commit())] == ["APPEND"]
    assert change_tuples(t) == []
    t.compact(full=True)
    assert replay(change_tuples(t)) == _table_rows(t) == {0: "v0", 1: "x"}


def test_a_full_compaction_commit_takes_every_bucket_written_since_the_last_one(catalog: Catalog) -> None:
    """Paimon's GlobalFullCompactionSinkWrite compacts at a full-compaction identifier every bucket
    written since the last full compaction, not only those written in that commit: the changelog
    of a bucket written at identifier 1 and left alone at 2 is out at 2."""
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(*((i, "a") for i in range(1, 11))))  # both buckets
    c.commit(w.prepare_commit(1), 1)
    w.write_arrow(_rows((0, "b")))  # one bucket
    compacted = [s for s in c.commit(w.prepare_commit(2), 2) if t.snapshot(s).commit_kind == "COMPACT"]
    assert compacted
    assert replay(change_tuples(t)) == _table_rows(t) == {0: "b", **{i: "a" for i in range(1, 11)}}
    w.write_arrow(_rows((0, "c")))
    c.commit(w.prepare_commit(3), 3)
    w.write_arrow(_rows((0, "d")))
    c.commit(w.prepare_commit(4), 4)
    assert replay(change_tuples(t)) == _table_rows(t)
