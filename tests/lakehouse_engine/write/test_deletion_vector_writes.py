"""Writes and compactions of a deletion-vector table (`deletion-vectors.enabled`).

Specification: a DV table reads exactly as the same writes into a table without vectors (merged on
read); after every commit its level 0 is empty (its readers do not see level 0); the rows a commit
replaces or deletes are marked in the vectors of their files; a compaction drops the vectors of the
files it removes; a commit whose vectors were computed against a stale base is recomputed.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError, UnsupportedFeatureError
from lakehouse_engine.format.deletion_vectors import DELETION_VECTORS_INDEX
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("n", pa.int64()), ("kind", pa.string())])
DV = {"deletion-vectors.enabled": "true", "rowkind.field": "kind"}
JAVA_TABLE = Path(__file__).parents[1] / "read" / "data" / "java_dv_table"


def _batch(ids: list[int], tag: str, kind: str = "+I") -> pa.Table:
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids], "n": [i % 7 for i in ids],
                     "kind": [kind] * len(ids)}, schema=SCHEMA)


def _live(table: FileStoreTable) -> list[Any]:
    return table.store.manifest_io().live_entries(table.latest_snapshot())


def _vectors(table: FileStoreTable) -> list[Any]:
    return [e for e in table.store.manifest_io().index_entries(table.latest_snapshot())
            if e.index_type == DELETION_VECTORS_INDEX]


def _data(table: FileStoreTable) -> list[dict[str, Any]]:
    return rows(read(table).drop_columns(["kind"]), "id")


# ---- the option ------------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "match"), [
    ({"merge-engine": "first-row"}, "first-row"),
    ({"changelog-producer": "full-compaction"}, "full-compaction"),
    ({"bucket": "-2"}, "postpone"),
])
def test_the_option_is_refused_where_paimon_refuses_it(catalog: Catalog, options: dict[str, str], match: str) -> None:
    with pytest.raises(InvalidOptionError, match=match):
        create_table(catalog, "t", SCHEMA, ["id"], options={**DV, **options})
    assert catalog.list_tables("db") == []


def test_the_option_needs_a_primary_key(catalog: Catalog) -> None:
    with pytest.raises(InvalidOptionError, match="primary key"):
        create_table(catalog, "t", SCHEMA, options={"deletion-vectors.enabled": "true"})


# ---- writes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [
    {"bucket": "2"},
    {"bucket": "-1", "dynamic-bucket.target-row-num": "40"},
    {"bucket": "1", "merge-engine": "partial-update", "ignore-delete": "true"},
    {"bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum", "ignore-delete": "true"},
    {"bucket": "1", "sequence.field": "n"},
    {"bucket": "1", "num-sorted-run.compaction-trigger": "2", "target-file-size": "2kb"},
])
def test_a_dv_table_reads_as_the_same_writes_merged_on_read(catalog: Catalog, options: dict[str, str]) -> None:
    dv = create_table(catalog, "dv", SCHEMA, ["id"], options={**DV, **options})
    merged = create_table(catalog, "merged", SCHEMA, ["id"], options={"rowkind.field": "kind", **options})
    rng = random.Random(7)
    for step in range(12):
        ids = sorted(rng.sample(range(200), rng.randint(1, 60)))
        kind = "-D" if step % 4 == 3 else "+I"
        batch = _batch(ids, f"s{step}-", kind)
        for t in (dv, merged):
            write(t, batch)
        assert not [e for e in _live(dv) if e.file.level == 0], step
        assert _data(dv) == _data(merged), step
    assert _vectors(dv), "upserts mark the rows they replace"
    dv.compact(full=True)
    assert _data(dv) == _data(merged)
    assert sum(e.row_count for e in _vectors(dv)) == 0, "a full compaction leaves no vector"


def test_an_upsert_marks_the_old_row_in_its_file_and_rewrites_nothing_else(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "1"})
    write(t, _batch(list(range(100)), "a"))
    first = {e.file.file_name for e in _live(t)}
    write(t, _batch([5, 50], "b"))
    live = _live(t)
    assert first <= {e.file.file_name for e in live}, "the older file stays, its rows marked"
    splits = t.new_read_builder().new_scan().plan().splits()
    marks = {f.file_name: d.cardinality for s in splits
             for f, d in zip(s.files, s.data_deletion_files or [None] * len(s.files), strict=True) if d}
    assert marks == {next(iter(first)): 2}
    assert [r["v"] for r in _data(t) if r["id"] in (5, 50)] == ["b5", "b50"]


def test_a_delete_of_a_key_never_written_changes_nothing(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "1"})
    write(t, _batch([1, 2], "a"))
    write(t, _batch([3], "x", "-D"))
    assert [r["id"] for r in _data(t)] == [1, 2]


def test_the_index_file_target_size_rolls_a_buckets_vectors(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        **DV, "bucket": "1", "deletion-vector.index-file.target-size": "1b",
        "num-sorted-run.compaction-trigger": "20"})
    for step in range(4):
        write(t, _batch(list(range(step * 10, step * 10 + 50)), f"s{step}"))
    assert len(_vectors(t)) > 1
    assert [r["v"] for r in _data(t)][:10] == [f"s0{i}" for i in range(10)]


def test_an_overwrite_replaces_the_partition_and_its_vectors(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "1"})
    write(t, _batch(list(range(20)), "a"))
    write(t, _batch(list(range(10)), "b"))
    write(t, _batch([100, 101], "c"), overwrite={})
    assert [r["id"] for r in _data(t)] == [100, 101]
    assert not [e for e in _live(t) if e.file.level == 0]
    assert sum(e.row_count for e in _vectors(t)) == 0


def test_write_only_leaves_level_zero_until_a_compaction(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "1", "write-only": "true"})
    write(t, _batch([1, 2], "a"))
    assert _data(t) == [], "level 0 of a DV table is invisible, as in Paimon"
    t.copy({"write-only": "false"}).compact()
    assert [r["v"] for r in _data(t)] == ["a1", "a2"]


# ---- concurrency ---------------------------------------------------------------------------------
def test_a_commit_computed_against_a_stale_base_is_recomputed(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "1"})
    write(t, _batch(list(range(50)), "a"))
    wb1, wb2 = t.new_batch_write_builder(), t.new_batch_write_builder()
    w1, w2 = wb1.new_write(), wb2.new_write()
    w1.write_arrow(_batch([1, 2, 3], "one"))
    w2.write_arrow(_batch([3, 4, 5], "two"))
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()  # both against the same base
    wb1.new_commit().commit(m1)
    wb2.new_commit().commit(m2)  # its vectors are stale: recomputed against what landed
    assert not [e for e in _live(t) if e.file.level == 0]
    got = {r["id"]: r["v"] for r in _data(t)}
    assert len(got) == 50
    assert [got[i] for i in range(1, 6)] == ["one1", "one2", "two3", "two4", "two5"]
    # Every key once: no vector lost (a duplicate) nor applied twice (a missing row).
    assert sorted(got) == list(range(50))


# ---- a table Paimon 0.9 wrote ---------------------------------------------------------------------
def test_writes_into_a_table_paimon_wrote_keep_its_vectors(tmp_path: Path) -> None:
    shutil.copytree(JAVA_TABLE, tmp_path / "db.db" / "t")
    t = Catalog(str(tmp_path)).get_table("db.t")
    before = {(r["id"], r["dt"]): r["v"] for r in read(t).to_pylist()}
    ids = sorted({k[0] for k in before})[:30]
    dts = {i: dt for i, dt in before}
    batch = pa.table({"id": pa.array(ids, pa.int64()), "dt": [dts[i] for i in ids],
                      "v": [f"ours{i}" for i in ids]}, schema=t.schema.arrow_schema())
    write(t, batch)
    after = {(r["id"], r["dt"]): r["v"] for r in read(t).to_pylist()}
    expected = dict(before)
    expected.update({(i, dts[i]): f"ours{i}" for i in ids})
    assert after == expected
    t.compact(full=True)
    assert {(r["id"], r["dt"]): r["v"] for r in read(t).to_pylist()} == expected


def test_an_append_table_with_vectors_is_still_refused(catalog: Catalog) -> None:
    from lakehouse_engine.format import features
    from lakehouse_engine.options import CoreOptions

    with pytest.raises(UnsupportedFeatureError, match="append table"):
        features.deletion_vectors("db.t", CoreOptions({"deletion-vectors.enabled": "true"}), [], primary_key=False)


# ---- the rest of the table's life ----------------------------------------------------------------
def test_rescale_schema_evolution_tags_rollback_branches_and_orphans_keep_a_dv_table_right(
        catalog: Catalog) -> None:
    from lakehouse_engine.schema_change import SchemaChange

    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "2"})
    write(t, _batch(list(range(60)), "a"))
    write(t, _batch(list(range(0, 60, 2)), "b"))
    tagged = _data(t)
    t.create_tag("even-b")
    t.rescale(3)
    t = catalog.get_table("db.t")
    assert _data(t) == tagged and not [e for e in _live(t) if e.file.level == 0]
    catalog.alter_table("db.t", [SchemaChange.add_column("extra", "INT")])
    t = catalog.get_table("db.t")
    batch = _batch([1, 3], "c").append_column("extra", pa.array([7, 8], pa.int32()))
    write(t, batch)
    got = {r["id"]: (r["v"], r["extra"]) for r in read(t).to_pylist()}
    assert got[1] == ("c1", 7) and got[2] == ("b2", None) and len(got) == 60
    t.create_branch("br", tag_name="even-b")
    br = t.branch_table("br")
    write(br, _batch([0, 5], "br"))
    assert {r["id"]: r["v"] for r in _data(br)}[5] == "br5"
    assert {r["id"]: r["v"] for r in read(t).to_pylist()}[5] == "a5"
    assert t.remove_orphan_files(older_than=2**62) == []
    assert {r["id"]: r["v"] for r in _data(catalog.get_table("db.t").branch_table("br"))}[0] == "br0"
    t.rollback_to("even-b")
    t = catalog.get_table("db.t")
    assert rows(read(t).select(["id", "v", "n"]), "id") == tagged


def test_two_writers_of_one_bucket_in_one_commit_are_compacted_again_together(catalog: Catalog) -> None:
    # (As Spark tasks of one job would be: each looked up without the other's files.)
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "1"})
    write(t, _batch(list(range(40)), "a"))
    wb = t.new_batch_write_builder()
    w1, w2 = wb.new_write(), wb.new_write()
    w1.write_arrow(_batch([1, 2], "one"))
    w2.write_arrow(_batch([30, 31], "two"))  # key-disjoint outputs: no level overlap to catch it
    wb.new_commit().commit(w1.prepare_commit() + w2.prepare_commit())
    assert not [e for e in _live(t) if e.file.level == 0]
    got = {r["id"]: r["v"] for r in _data(t)}
    assert sorted(got) == list(range(40))
    assert [got[i] for i in (1, 2, 30, 31)] == ["one1", "one2", "two30", "two31"]


def test_a_streaming_writer_compacts_each_commit_against_the_table_as_it_is_then(
        catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    # Its earlier commits compacted the bucket (and expiry removed the files they replaced): each
    # prepare_commit looks its keys up in the bucket as it is now, not as it was at the start.
    t = create_table(catalog, "t", SCHEMA, ["id"], options={**DV, "bucket": "1"})
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    for step in range(4):
        w.write_arrow(_batch(list(range(step * 5, step * 5 + 20)), f"s{step}-"))
        assert len(c.commit(w.prepare_commit(), step + 1)) == 2, "APPEND, then its COMPACT only"
        t.expire_snapshots(retain_max=1, retain_min=1)
    # No compaction was computed against a stale base (and recomputed by the committer).
    assert "lost to a concurrent change" not in caplog.text
    got = {r["id"]: r["v"] for r in _data(t)}
    assert sorted(got) == list(range(35))
    assert got[0] == "s0-0" and got[19] == "s3-19" and got[34] == "s3-34"
