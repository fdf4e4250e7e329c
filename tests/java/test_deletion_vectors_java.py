"""We read the deletion-vector tables Paimon 0.9 (Java) writes, snapshot by snapshot, exactly as it does.

Paimon writes a primary-key table with `deletion-vectors.enabled`: inserts, upserts, deletes and a
full compaction, each commit looking level 0 up and marking the rows it replaces in per-file
vectors. Every snapshot is read by Paimon and by us, and the two must agree row for row.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.table import FileStoreTable
from tests.java.conftest import Judge, canonical_rows, ok, sorted_values
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.dv_fixture import JAVA_READS, copy_table

pytestmark = pytest.mark.java

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.string())])


def _rows(ids: range, tag: str, kind: str = "+I") -> list[list[Any]]:
    batch = pa.table({"id": list(ids), "dt": [f"d{i % 2}" for i in ids], "v": [f"{tag}{i}" for i in ids]},
                     schema=SCHEMA)
    return [[kind, *r[1:]] for r in canonical_rows(batch)]


# (what, request body) in commit order; every step is one snapshot.
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("insert", {"op": "write", "rows": _rows(range(0, 200), "a")}),
    ("upsert", {"op": "write", "rows": _rows(range(150, 300), "b", "+U")}),
    ("delete", {"op": "write", "rows": _rows(range(0, 300, 7), "x", "-D")}),
    ("compact", {"op": "compact", "full": True}),
    ("upsert", {"op": "write", "rows": _rows(range(280, 320), "c")}),
]


SNAPSHOTS = 2 * sum(body["op"] == "write" for _, body in STEPS) + sum(body["op"] == "compact" for _, body in STEPS)


def _model(upto: int) -> list[tuple[Any, ...]]:
    live: dict[int, str] = {}
    for _, body in STEPS[:upto]:
        for kind, i, _dt, v in body.get("rows", []):
            if kind == "-D":
                live.pop(i, None)
            else:
                live[i] = v
    return sorted((i, f"d{i % 2}", v) for i, v in live.items())


@pytest.fixture(scope="module")
def java_dv_table(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> tuple[Path, list[dict[str, Any]]]:
    """A DV table Paimon wrote step by step, and Paimon's read of every snapshot."""
    warehouse = tmp_path_factory.mktemp("dv")
    catalog = Catalog(str(warehouse))
    catalog.create_database("db", ignore_if_exists=True)
    for name, partition in (("flat", []), ("parted", ["dt"])):
        create_table(catalog, name, SCHEMA, primary_keys=["id", *partition], partition_keys=partition,
                     options={"bucket": "2"})
    requests: list[dict[str, Any]] = []
    for name in ("flat", "parted"):
        base = {"warehouse": str(warehouse), "table": f"db.{name}"}
        requests.append({**base, "op": "alter", "changes": [
            {"kind": "option", "key": "deletion-vectors.enabled", "value": "true"}]})
        for _, body in STEPS:
            requests.append({**base, **body})
        # A write of a DV table commits twice in Paimon (APPEND of level 0, then COMPACT of it).
        for snapshot in range(1, SNAPSHOTS + 1):
            requests.append({**base, "op": "read", "options": {"scan.snapshot-id": str(snapshot)}})
    answers = [ok(a) for a in judge(requests)]
    return warehouse, answers


def _table(warehouse: Path, name: str) -> FileStoreTable:
    return Catalog(str(warehouse)).get_table(f"db.{name}")


@pytest.mark.parametrize("name", ["flat", "parted"])
def test_we_read_every_snapshot_of_a_java_dv_table_as_java_does(
        java_dv_table: tuple[Path, list[dict[str, Any]]], name: str) -> None:
    warehouse, answers = java_dv_table
    per_table = 1 + len(STEPS) + SNAPSHOTS
    mine = answers[per_table * ("flat", "parted").index(name):][:per_table]
    after_step = {a["snapshot"]: step for step, a in enumerate(mine[1:1 + len(STEPS)], start=1)}
    assert sorted(after_step)[-1] == SNAPSHOTS
    table = _table(warehouse, name)
    vectors = 0
    for snapshot, answer in enumerate(mine[1 + len(STEPS):], start=1):
        ours = read(table, snapshot_id=snapshot)
        expected = sorted_values(answer["rows"])
        assert sorted_values(canonical_rows(ours)) == expected, snapshot
        if snapshot in after_step:
            assert sorted(tuple(r) for r in expected) == _model(after_step[snapshot]), snapshot
        plan = table.new_read_builder().with_snapshot(snapshot).new_scan().plan()
        assert all(f.level > 0 for s in plan.splits() for f in s.files)  # level 0 is invisible
        assert all(len(section) == 1 for s in plan.splits() for section in s.sections)
        vectors += sum(d is not None for s in plan.splits() for d in s.data_deletion_files or [])
    assert vectors > 0  # the table really carries vectors that the reads applied


def test_a_flipped_byte_in_a_java_vector_is_a_corrupt_file_naming_the_index_file(
        java_dv_table: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    warehouse, _ = java_dv_table
    copy = tmp_path / "wh"
    shutil.copytree(warehouse, copy)
    table = _table(copy, "flat")
    snapshot, deletion = next(
        (n, d) for n in range(1, SNAPSHOTS + 1)
        for s in table.new_read_builder().with_snapshot(n).new_scan().plan().splits()
        for d in s.data_deletion_files or [] if d is not None)
    path = Path(deletion.dv_index_path)
    data = bytearray(path.read_bytes())
    data[deletion.offset + 4 + deletion.length // 2] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=path.name):
        read(table, snapshot_id=snapshot)


@pytest.mark.parametrize(("ranges", "finds_vectors"), [("ours", True), ("old", False)])
def test_java_finds_the_ranges_in_our_index_manifests_and_not_under_the_other_name(
        tmp_path: Path, judge: Judge, ranges: str, finds_vectors: bool) -> None:
    # Paimon 0.9's index manifests (IndexManifestEntry.SCHEMA) name the field
    # `_DELETIONS_VECTORS_RANGES`, as 1.x and pypaimon do, and 0.9 reads it by name: ours, encoded
    # by us, read as Java's own; under `_DELETION_VECTORS_RANGES` (0.9's IndexFileMeta schema's
    # name) 0.9 finds no vectors.
    copy_table(tmp_path, ranges)
    snapshots = [6, 9]
    answers = judge([{"op": "read", "warehouse": str(tmp_path), "table": "db.t",
                      "options": {"scan.snapshot-id": str(s)}} for s in snapshots])
    for snapshot, answer in zip(snapshots, answers, strict=True):
        expected = sorted_values(JAVA_READS[snapshot])
        if finds_vectors:
            assert sorted_values(ok(answer)["rows"]) == expected, snapshot
        else:
            assert "error" in answer or sorted_values(answer["rows"]) != expected, snapshot
