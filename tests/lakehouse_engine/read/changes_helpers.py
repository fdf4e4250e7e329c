"""A small keyed table with row kinds, and a writer of lists of (id, value, kind)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                    pa.field("k", pa.string())])


def keyed_table(catalog: Catalog, name: str = "t", **options: Any) -> FileStoreTable:
    opts = {"bucket": "2", "rowkind.field": "k", **options}
    return create_table(catalog, name, SCHEMA, primary_keys=["id"], options=opts)


def put(table: FileStoreTable, *rows: tuple[int, str | None, str]) -> int:
    """Commit rows (id, value, row kind) in one batch; the snapshot id it landed as."""
    data = pa.Table.from_pylist([{"id": i, "v": v, "k": k} for i, v, k in rows], schema=SCHEMA)
    return write(table, data)[0]


def changes(rows: pa.Table) -> list[tuple[str, int, str | None]]:
    """(row kind, id, value) of a change read, sorted within the read by id then kind."""
    out = [(r["_row_kind"], r["id"], r["v"]) for r in rows.to_pylist()]
    return sorted(out, key=lambda c: (c[1], c[0]))


def change_tuples(table: FileStoreTable, start: int = 0) -> list[tuple[int, str, int, Any]]:
    """(snapshot id, row kind, id, value) of every change after snapshot `start`, as read."""
    return [(r["_snapshot_id"], r["_row_kind"], r["id"], r["v"]) for r in table.changes(start).to_pylist()]


def replay(changes: list[tuple[int, str, int, Any]]) -> dict[int, Any]:
    """The table the changes make, applied in order to an empty one: id -> value."""
    state: dict[int, Any] = {}
    for _, kind, k, v in changes:
        if kind in ("+I", "+U"):
            state[k] = v
        else:
            state.pop(k, None)
    return state
