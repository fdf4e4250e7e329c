"""pypaimon 2.1.0 and deletion vectors: it reads Paimon 0.9's DV table (manifests encoded by us) as
Java does, finding the ranges under `_DELETIONS_VECTORS_RANGES` and not under `_DELETION_VECTORS_RANGES`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.lakehouse_engine.read.dv_fixture import JAVA_READS, copy_table

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
