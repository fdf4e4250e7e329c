"""Shared fixtures: a fresh warehouse per test and small helpers to write and read tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.table import FileStoreTable


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    cat = Catalog(str(tmp_path / "warehouse"))
    cat.create_database("db")
    return cat


def create_table(catalog: Catalog, name: str, schema: pa.Schema, primary_keys: Sequence[str] = (),
                 partition_keys: Sequence[str] = (), options: dict[str, Any] | None = None) -> FileStoreTable:
    opts = {k: str(v) for k, v in (options or {}).items()}
    catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
        schema, partition_keys=list(partition_keys), primary_keys=list(primary_keys), options=opts))
    return catalog.get_table(f"db.{name}")


def write(table: FileStoreTable, data: pa.Table, overwrite: dict[str, Any] | None = None) -> list[int]:
    wb = table.new_batch_write_builder()
    if overwrite is not None:
        wb.overwrite(overwrite)
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(data)
    ids = c.commit(w.prepare_commit())
    w.close()
    c.close()
    return ids


def read(table: FileStoreTable, snapshot_id: int | None = None, projection: Sequence[str] | None = None,
         predicate: Any = None) -> pa.Table:
    rb = table.new_read_builder()
    if snapshot_id is not None:
        rb = rb.with_snapshot(snapshot_id)
    if projection is not None:
        rb = rb.with_projection(list(projection))
    if predicate is not None:
        rb = rb.with_filter(predicate)
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def rows(table: pa.Table, *sort_by: str) -> list[dict[str, Any]]:
    out = table.to_pylist()
    keys = list(sort_by) or table.column_names
    return sorted(out, key=lambda r: tuple((r[k] is None, r[k]) for k in keys))


def snapshot_files(table: FileStoreTable) -> dict[str, bytes]:
    """Every file under the table directory with its bytes: to prove nothing changed."""
    root = Path(table.path)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
