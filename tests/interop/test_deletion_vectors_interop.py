"""pypaimon 2.1.0 and deletion vectors: it reads Paimon 0.9's DV table (manifests encoded by us) as
Java does, finding the ranges under `_DELETIONS_VECTORS_RANGES` and not under `_DELETION_VECTORS_RANGES`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.read.dv_fixture import JAVA_READS, copy_table, rewrite_vectors

READ = """
from pypaimon import CatalogFactory
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = {}
for snapshot in ARGS["snapshots"]:
    t = catalog.get_table("db.t").copy({"scan.snapshot-id": str(snapshot)})
    rb = t.new_read_builder()
    try:
        rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
        out[snapshot] = sorted([r["id"], r["dt"], r["v"]] for r in rows)
    except Exception as e:
        out[snapshot] = "error: " + repr(e)
emit(out)
"""
SNAPSHOTS = [6, 9]  # after the delete, and after the compaction and the last upsert


def _java(snapshot: int) -> list[list[Any]]:
    return sorted(r[1:] for r in JAVA_READS[snapshot])


def test_pypaimon_reads_the_dv_table_with_our_index_manifests_as_java(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    copy_table(tmp_path)
    got = pypaimon(READ, warehouse=str(tmp_path), snapshots=SNAPSHOTS)
    for snapshot in SNAPSHOTS:
        assert got[str(snapshot)] == _java(snapshot), snapshot


def test_pypaimon_misses_the_vectors_under_the_other_name(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    copy_table(tmp_path, "old")
    got = pypaimon(READ, warehouse=str(tmp_path), snapshots=SNAPSHOTS)
    assert all(got[str(s)] != _java(s) for s in SNAPSHOTS)


def test_pypaimons_writes_to_a_dv_table_stay_level_zero_and_read_as_pypaimon_reads_them(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    # pypaimon 2.1.0 writes a DV primary-key table's rows to level 0 and makes no vectors: every
    # DV reader (pypaimon's own, Paimon's, ours) sees none of them until Paimon compacts the table.
    got = pypaimon("""
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
s = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
cat.create_table("db.p", Schema.from_pyarrow_schema(
    s, primary_keys=["id"], options={"bucket": "1", "deletion-vectors.enabled": "true"}), False)
t = cat.get_table("db.p")
for tag, ids in (("a", range(0, 100)), ("b", range(50, 150))):
    wb = t.new_batch_write_builder(); w = wb.new_write(); c = wb.new_commit()
    w.write_arrow(pa.table({"id": list(ids), "v": [tag + str(i) for i in ids]}, schema=s))
    c.commit(w.prepare_commit()); w.close(); c.close()
rb = t.new_read_builder()
emit(rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows)
""", warehouse=str(tmp_path))
    table = Catalog(str(tmp_path)).get_table("db.p")
    assert got == 0 and read(table).num_rows == 0
    assert table.latest_snapshot().id == 2 and not table.latest_snapshot().index_manifest


def test_pypaimon_reads_deletion_vectors_our_index_file_writer_wrote(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    rewrite_vectors(copy_table(tmp_path), 30)
    got = pypaimon(READ, warehouse=str(tmp_path), snapshots=sorted(JAVA_READS))
    for snapshot in sorted(JAVA_READS):
        assert got[str(snapshot)] == _java(snapshot), snapshot


READ_T = """
from pypaimon import CatalogFactory
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = {}
for snapshot in ARGS["snapshots"]:
    t = catalog.get_table("db.t").copy({"scan.snapshot-id": str(snapshot)})
    rb = t.new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    out[snapshot] = sorted([r["id"], r["v"]] for r in rows)
emit(out)
"""


def test_pypaimon_reads_every_snapshot_of_a_dv_table_we_wrote(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    # Insert, upsert, delete, upsert, full compaction, expiry: pypaimon reads each kept snapshot
    # as the model holds (level 0 empty after every commit, replaced rows marked in vectors).
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                        pa.field("k", pa.string())])
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    table = create_table(catalog, "t", schema, ["id"], options={
        "bucket": "2", "deletion-vectors.enabled": "true", "rowkind.field": "k"})
    model: dict[int, str] = {}
    expected: dict[int, list[list[Any]]] = {}
    for tag, ids, kind in (("a", range(0, 200), "+I"), ("b", range(150, 300), "+I"),
                           ("x", range(0, 300, 7), "-D"), ("c", range(280, 320), "+I"), (None, None, None)):
        if tag is None:
            table.compact(full=True)
        else:
            assert ids is not None and kind is not None
            write(table, pa.table({"id": list(ids), "v": [f"{tag}{i}" for i in ids], "k": [kind] * len(ids)},
                                  schema=schema))
            for i in ids:
                if kind == "-D":
                    model.pop(i, None)
                else:
                    model[i] = f"{tag}{i}"
        expected[table.latest_snapshot().id] = sorted([i, v] for i, v in model.items())  # type: ignore[union-attr]
    table.expire_snapshots(retain_max=3, retain_min=3)
    kept = [s for s in expected if s >= table.snapshots()[0].id]
    got = pypaimon(READ_T, warehouse=str(tmp_path), snapshots=kept)
    for snapshot in kept:
        assert got[str(snapshot)] == expected[snapshot], snapshot
        assert sorted([r["id"], r["v"]] for r in read(table, snapshot_id=snapshot).to_pylist()) == expected[snapshot]


def test_our_write_makes_pypaimons_level_zero_rows_visible(tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    # pypaimon leaves its rows of a DV table in level 0; our next write compacts the bucket's whole
    # level 0 through the lookup, so every reader (pypaimon too) then sees them.
    pypaimon("""
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
s = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
cat.create_table("db.t", Schema.from_pyarrow_schema(
    s, primary_keys=["id"], options={"bucket": "1", "deletion-vectors.enabled": "true"}), False)
t = cat.get_table("db.t")
for tag, ids in (("a", range(0, 100)), ("b", range(50, 150))):
    wb = t.new_batch_write_builder(); w = wb.new_write(); c = wb.new_commit()
    w.write_arrow(pa.table({"id": list(ids), "v": [tag + str(i) for i in ids]}, schema=s))
    c.commit(w.prepare_commit()); w.close(); c.close()
emit(0)
""", warehouse=str(tmp_path))
    table = Catalog(str(tmp_path)).get_table("db.t")
    write(table, pa.table({"id": pa.array([140, 141], pa.int64()), "v": ["ours140", "ours141"]}))
    expected = sorted([i, "ours" + str(i) if i in (140, 141) else ("b" if i >= 50 else "a") + str(i)]
                      for i in range(150))
    latest = table.latest_snapshot().id  # type: ignore[union-attr]
    got = pypaimon(READ_T, warehouse=str(tmp_path), snapshots=[latest])
    assert got[str(latest)] == expected
    assert sorted([r["id"], r["v"]] for r in read(table).to_pylist()) == expected
