"""pypaimon 2.1.0 and deletion vectors: it reads Paimon 0.9's DV table (manifests encoded by us) as
Java does, finding the ranges under `_DELETIONS_VECTORS_RANGES` and not under `_DELETION_VECTORS_RANGES`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import read
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
