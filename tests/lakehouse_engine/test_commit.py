"""Commits: atomic snapshots, racing committers in separate processes, hints that lie."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, LakehouseError
from lakehouse_engine.io_warehouse import warehouse_file_io
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.int64())])


def _writer_process(warehouse: str, writer: int, commits: int) -> None:
    table = Catalog(warehouse).get_table("db.t")
    for i in range(commits):
        ids = [writer * 1_000_000 + i * 10 + j for j in range(10)]
        write(table, pa.table({"id": ids, "writer": [writer] * 10}, schema=SCHEMA))


def test_racing_committer_processes_lose_nothing(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "2", "commit.min-retry-wait": "1 ms",
                                  "commit.max-retry-wait": "50 ms", "commit.max-retries": "200"})
    writers, commits = 4, 8
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer_process, args=(catalog.warehouse, w, commits)) for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    ids = table.snapshot_manager().list_snapshot_ids()
    assert ids == list(range(1, len(ids) + 1))  # contiguous: no id taken twice
    kinds = [s.commit_kind for s in table.snapshots()]
    assert kinds.count("APPEND") == writers * commits  # every acknowledged write landed once
    assert read(table).num_rows == writers * commits * 10
    assert table.latest_snapshot().total_record_count == writers * commits * 10


def test_put_if_absent_lets_exactly_one_writer_win(tmp_path: Path) -> None:
    fio, _ = warehouse_file_io(str(tmp_path))
    target = str(tmp_path / "snapshot-1")
    assert fio.try_put_if_absent(target, b"first")
    assert not fio.try_put_if_absent(target, b"second")
    assert Path(target).read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["snapshot-1"]  # no temp files left


def test_lying_latest_hint_does_not_mislead_readers(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    for i in range(3):
        write(table, pa.table({"id": [i], "writer": [0]}, schema=SCHEMA))
    hint = Path(table.path_factory.snapshot_dir) / "LATEST"
    for bogus in ("1", "99", "garbage", ""):
        hint.write_text(bogus)
        assert table.snapshot_manager().latest_snapshot_id() == 3
        assert read(table).num_rows == 3
    hint.unlink()
    assert table.snapshot_manager().latest_snapshot_id() == 3
    write(table, pa.table({"id": [7], "writer": [0]}, schema=SCHEMA))
    assert table.snapshot_manager().latest_snapshot_id() == 4 and hint.read_text() == "4"


def test_a_batch_commit_commits_once(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": [1], "writer": [0]}, schema=SCHEMA))
    messages = w.prepare_commit()
    c.commit(messages)
    with pytest.raises(LakehouseError, match="already used"):
        c.commit(messages)
    assert table.snapshot_manager().list_snapshot_ids() == [1]


def test_empty_commit_writes_no_snapshot(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    wb = table.new_batch_write_builder()
    assert wb.new_commit().commit(wb.new_write().prepare_commit()) == []
    assert table.latest_snapshot() is None
    assert read(table).num_rows == 0


def test_many_commits_merge_manifests_and_stay_readable(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "manifest.merge-min-count": "5", "write-only": "true"})
    for i in range(12):
        write(table, pa.table({"id": [i % 7], "writer": [i]}, schema=SCHEMA))
    snap = table.latest_snapshot()
    assert len(table.store.manifest_io().data_manifests(snap)) <= 7
    assert sorted(read(table).column("writer").to_pylist()) == [5, 6, 7, 8, 9, 10, 11]
    assert snap.total_record_count == 12


def test_snapshot_json_is_what_paimon_expects(catalog: Catalog) -> None:
    import json

    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    write(table, pa.table({"id": [1, 2], "writer": [0, 0]}, schema=SCHEMA))
    doc = json.loads(Path(table.path_factory.snapshot_path(1)).read_text())
    assert doc["version"] == 3 and doc["id"] == 1 and doc["commitKind"] == "APPEND"
    assert doc["commitIdentifier"] == 2**63 - 1 and doc["totalRecordCount"] == 2
    for key in ("baseManifestList", "deltaManifestList", "commitUser", "timeMillis", "schemaId"):
        assert key in doc
