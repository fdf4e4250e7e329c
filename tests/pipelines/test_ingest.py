"""Landing discovery and the ingestion ledger (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.lib.landing import list_landing_files
from pipelines.lib.ledger import Ledger, LedgerState
from pipelines.lib.resources import LakehouseResource


def _touch(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_landing_files_are_the_known_formats_in_dt_folders(tmp_path: Path) -> None:
    for name in ("dt=2026-11-01/a.jsonl", "dt=2026-11-01/b.CSV", "dt=2026-11-02/c.parquet",
                 "dt=2026-11-02/notes.txt", "dt=2026-11-02/_SUCCESS.json", "dt=2026-11-02/.hidden.csv",
                 "stray.jsonl", "other/d.csv"):
        _touch(tmp_path / name)
    found = list_landing_files(tmp_path)
    assert [(f.relpath, f.dt, f.format) for f in found] == [
        ("dt=2026-11-01/a.jsonl", "2026-11-01", "json"),
        ("dt=2026-11-01/b.CSV", "2026-11-01", "csv"),
        ("dt=2026-11-02/c.parquet", "2026-11-02", "parquet"),
    ]
    assert [f.relpath for f in list_landing_files(tmp_path, ["2026-11-02"])] == ["dt=2026-11-02/c.parquet"]
    assert list_landing_files(tmp_path / "missing") == []


def test_the_ledger_keeps_ingested_files_and_pending_batches(tmp_path: Path) -> None:
    _touch(tmp_path / "landing/dt=2026-11-01/a.jsonl")
    _touch(tmp_path / "landing/dt=2026-11-01/b.jsonl")
    ledger = Ledger(tmp_path / "ledger" / "t.json")
    assert ledger.read() == LedgerState()
    files = list_landing_files(tmp_path / "landing")
    with ledger.update() as state:
        state.files[files[0].relpath] = {"batch": "b1"}
        state.batches["b1"] = {"created_at": 1.0, "partitions": {"2026-11-01": {"rows": 10, "snapshot_id": None},
                                                                  "2026-11-02": {"rows": 0, "snapshot_id": None}}}
        state.batches["b0"] = {"created_at": 0.5, "partitions": {"2026-11-01": {"rows": 3, "snapshot_id": None}}}
    state = ledger.read()
    assert [f.relpath for f in state.new_files(files)] == ["dt=2026-11-01/b.jsonl"]
    assert state.pending(["2026-11-01", "2026-11-02"]) == [("b0", "2026-11-01", 3), ("b1", "2026-11-01", 10)]
    with ledger.update() as state:
        assert state.mark_written(state.pending(["2026-11-01"])[:1], snapshot_id=4) == ["b0"]
    with ledger.update() as state:  # b1's other day staged no rows: one day written finishes it
        assert state.mark_written([("b1", "2026-11-01", 10)], snapshot_id=5) == ["b1"]
    assert ledger.read().pending(["2026-11-01"]) == []
    assert ledger.read().batches["b0"]["partitions"]["2026-11-01"]["snapshot_id"] == 4


def test_a_failed_update_leaves_the_ledger_as_it_was(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.json")
    with ledger.update() as state:
        state.files["a"] = {"batch": "b1"}
    with pytest.raises(RuntimeError), ledger.update() as state:
        state.files["b"] = {"batch": "b2"}
        raise RuntimeError("the Spark job failed")
    assert list(ledger.read().files) == ["a"]


def test_pipeline_folders_sit_under_the_warehouse(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=f"file://{tmp_path}", table="shop.orders")
    assert lakehouse.landing_path == tmp_path / "landing" / "shop.orders"
    assert lakehouse.quarantine_path == tmp_path / "quarantine" / "shop.orders"
    assert lakehouse.ledger_path == tmp_path / "ledger" / "shop.orders.json"
    elsewhere = LakehouseResource(warehouse=str(tmp_path), landing_dir=str(tmp_path / "drop"))
    assert elsewhere.landing_path == tmp_path / "drop"


def test_a_new_table_gets_the_pipeline_options_and_the_bucket_mode(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=-2,
                                  table_options={"num-sorted-run.compaction-trigger": "3"})
    table = lakehouse.get_or_create_table()
    assert table.options.bucket == -2
    assert table.schema.options["sequence.field"] == "updated_at"
    assert table.schema.options["write-only"] == "true"
    assert table.schema.options["num-sorted-run.compaction-trigger"] == "3"
    assert list(table.schema.primary_keys) == ["order_id", "dt"]
    assert lakehouse.get_or_create_table().path == table.path
