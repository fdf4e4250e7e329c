"""Re-sequencing a late commit (write/resequence.py): what it drops with a bucket's writer compaction."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write


def test_a_re_sequenced_bucket_commits_none_of_its_dropped_compactions_vectors(catalog: Catalog) -> None:
    # Writer A prepares its commit (its buckets compacted, their vectors in new index files);
    # writer B's new files of one of A's keys land first, without a compaction yet (write-only).
    # A's commit re-sequences that bucket's files and drops its compaction, index files and all:
    # the COMPACT that follows must not commit those vectors (their files are deleted, and they
    # were computed for files no longer there). Before, it did: every later read raised
    # "deletion-vector index file ... is missing".
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "dvrace", schema, ["id"], options={"bucket": "2", "deletion-vectors.enabled": "true"})
    write(t, pa.table({"id": list(range(20)), "v": ["a"] * 20}, schema=schema))
    a = t.new_batch_write_builder()
    wa = a.new_write()
    wa.write_arrow(pa.table({"id": list(range(20)), "v": ["b"] * 20}, schema=schema))
    messages = wa.prepare_commit()
    assert sum(bool(m.deletion_vector_files) for m in messages) == 2
    b = t.copy({"write-only": "true"}).new_batch_write_builder()
    wb = b.new_write()
    wb.write_arrow(pa.table({"id": [0], "v": ["c"]}, schema=schema))
    b.new_commit().commit(wb.prepare_commit())
    a.new_commit().commit(messages)
    rows = {r["id"]: r["v"] for r in read(catalog.get_table("db.dvrace")).to_pylist()}
    assert rows == {i: "b" for i in range(20)}  # A committed after B: its rows win



def _older_level0_under_a_later_compaction(catalog: Catalog, a_key: int, b_kind: str = "+U") -> tuple[Any, list[int]]:
    """Writer A's row of `a_key` lands at level 0 (write-only: no compaction) after writer B
    prepared its commit, numbered below B's (another commit raised the bucket's numbers between
    A's write and B's and shares no key with A, so A's commit re-sequences nothing; nor does B's,
    whose numbers are above A's). B then commits key 1 (`b_kind`: an upsert or a delete) with its
    compaction, computed without A's file. Returns the table and B's snapshot ids."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                        pa.field("rk", pa.string())])

    def batch(ids: list[int], v: str, kind: str = "+I") -> pa.Table:
        return pa.table({"id": ids, "v": [v] * len(ids), "rk": [kind] * len(ids)}, schema=schema)

    t = create_table(catalog, "dvrace", schema, ["id"],
                     options={"bucket": "1", "deletion-vectors.enabled": "true", "rowkind.field": "rk"})
    write(t, batch(list(range(10)), "a"))
    a = t.copy({"write-only": "true"}).new_batch_write_builder()
    wa = a.new_write()
    wa.write_arrow(batch([a_key], "A", "+U"))
    a_messages = wa.prepare_commit()
    write(t, batch([5], "C", "+U"))
    b = t.new_batch_write_builder()
    wb = b.new_write()
    wb.write_arrow(batch([1], "B", b_kind))
    b_messages = wb.prepare_commit()
    assert any(m.compact_before for m in b_messages)  # B compacts its level 0 (a delete: into nothing)
    a_files = [f.file_name for m in a_messages for f in m.new_files]
    a.new_commit().commit(a_messages)
    assert [f.file_name for m in a_messages for f in m.new_files] == a_files  # A not re-sequenced
    ids = b.new_commit().commit(b_messages)
    lo = min(f.min_sequence_number for m in b_messages for f in m.new_files)
    assert max(f.max_sequence_number for m in a_messages for f in m.new_files) < lo  # B not re-sequenced
    return catalog.get_table("db.dvrace"), ids


def _rows(t: Any) -> dict[int, str]:
    return {r["id"]: r["v"] for r in read(t).to_pylist()}


def test_a_compaction_never_takes_rows_above_an_older_level0_file_it_did_not_see(catalog: Catalog) -> None:
    # B's compaction would put B's row of key 1 above level 0 while A's older row of key 1 stays
    # there; the compaction that then takes A's file up looks key 1 up, finds B's row above and
    # marks it: the table read A's row though B committed after A (before: {1: "A"}). The
    # compaction loses, and the bucket is compacted again with both files.
    t, ids = _older_level0_under_a_later_compaction(catalog, a_key=1)
    assert _rows(t) == {**{i: "a" for i in range(10)}, 1: "B", 5: "C"}
    assert not [e for e in t.store.manifest_io().live_entries(t.latest_snapshot()) if e.file.level == 0]
    assert len(ids) == 2  # B's data, then the bucket compacted again (B's own compaction lost)


def test_a_compaction_never_drops_a_delete_above_an_older_level0_file_it_did_not_see(catalog: Catalog) -> None:
    # B deletes key 1: its compaction marks the old row and drops the delete (nothing older of
    # key 1 is above), but A's older row of key 1 stays at level 0, and once taken up it shows
    # again though B's delete came after it (before: {1: "A"}).
    t, ids = _older_level0_under_a_later_compaction(catalog, a_key=1, b_kind="-D")
    assert _rows(t) == {**{i: "a" for i in range(10) if i != 1}, 5: "C"}
    assert len(ids) == 2


def test_an_unseen_level0_file_of_other_keys_lets_the_compaction_land(catalog: Catalog) -> None:
    # A's older level-0 file holds key 7 only: B's compaction takes nothing above a record of
    # its keys, so it lands; the committer then takes A's file up too.
    t, ids = _older_level0_under_a_later_compaction(catalog, a_key=7)
    assert _rows(t) == {**{i: "a" for i in range(10)}, 1: "B", 5: "C", 7: "A"}
    assert len(ids) == 3  # B's data, B's compaction, then A's level 0 taken up


def test_a_first_row_compaction_never_takes_a_key_above_an_older_level0_record_of_it(catalog: Catalog) -> None:
    # First-row: A's row of key 11 lands at level 0 before B's (A's numbers are below B's, and
    # no commit re-sequences). B's compaction, computed before A's file landed, would take B's
    # row of key 11 up and leave A's, the first, at level 0 under it: Paimon's readers, which
    # skip level 0, would read B's (before: A's file stayed at level 0). The compaction loses;
    # the committer takes both up, A's row first.
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "firstrace", schema, ["id"], options={"bucket": "1", "merge-engine": "first-row"})
    write(t, pa.table({"id": list(range(10)), "v": ["a"] * 10}, schema=schema))
    a = t.copy({"write-only": "true"}).new_batch_write_builder()
    wa = a.new_write()
    wa.write_arrow(pa.table({"id": [11], "v": ["A"]}, schema=schema))
    a_messages = wa.prepare_commit()
    write(t, pa.table({"id": [12], "v": ["C"]}, schema=schema))
    b = t.new_batch_write_builder()
    wb = b.new_write()
    wb.write_arrow(pa.table({"id": [11], "v": ["B"]}, schema=schema))
    b_messages = wb.prepare_commit()
    assert any(f.level > 0 for m in b_messages for f in m.compact_after)
    a.new_commit().commit(a_messages)
    b.new_commit().commit(b_messages)
    assert max(f.max_sequence_number for m in a_messages for f in m.new_files) < min(
        f.min_sequence_number for m in b_messages for f in m.new_files)  # nothing re-sequenced
    t = catalog.get_table("db.firstrace")
    live = t.store.manifest_io().live_entries(t.latest_snapshot())
    assert not [e for e in live if e.file.level == 0]  # Paimon's readers skip level 0
    assert _rows(t) == {**{i: "a" for i in range(10)}, 11: "A", 12: "C"}
    write(t, pa.table({"id": [13], "v": ["D"]}, schema=schema))
    assert _rows(catalog.get_table("db.firstrace")) == {**{i: "a" for i in range(10)}, 11: "A", 12: "C", 13: "D"}
