"""A small keyed table with row kinds, and a writer of lists of (id, value, kind)."""

from __future__ import annotations

from collections.abc import Iterable
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


def strict_replay(changes: Iterable[tuple[str, Any, Any]]) -> dict[Any, Any]:
    """The table (key -> value) that (row kind, key, value) changes make, applied in order to an
    empty one, strictly: `+I`/`+U` only of an absent key, `-U`/`-D` only of the value the key holds
    (a change given twice, or against a row that is not there, fails with what it met)."""
    state: dict[Any, Any] = {}
    for kind, key, value in changes:
        if kind in ("+I", "+U"):
            assert key not in state, f"{kind} of key {key} that holds {state.get(key)}: {value}"
            state[key] = value
        else:
            assert state.get(key) == value, f"{kind} of key {key} {value}, but it holds {state.get(key)}"
            del state[key]
    return state


def kinds_keys_values(changes: pa.Table, *values: str) -> list[tuple[str, Any, Any]]:
    """(row kind, id, value) of each change read: the value is column `values[0]`, or the tuple of
    `values` when there are several."""
    return [(r["_row_kind"], r["id"], r[values[0]] if len(values) == 1 else tuple(r[v] for v in values))
            for r in changes.to_pylist()]
