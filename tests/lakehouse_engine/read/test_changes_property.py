"""Property: whatever the interleaving of writers of the same keys, compactions and deletes, the
changes read snapshot by snapshot, replayed in snapshot order on an empty table, give the table."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from lakehouse_engine import Catalog, CommitConflictError, Schema
from lakehouse_engine.errors import UnsupportedError
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.test_same_keys_property import MODES, SCHEMA, actions


def _replay(table: Any) -> dict[int, int]:
    state: dict[int, int] = {}
    changes = table.changes(0)
    for kind, k, v in zip(changes.column("_row_kind").to_pylist(), changes.column("id").to_pylist(),
                          changes.column("v").to_pylist(), strict=True):
        if kind in ("+I", "+U"):
            state[k] = v
        else:
            state.pop(k, None)
    return state


def _run(options: dict[str, str], script: list[tuple[str, Any, Any]]) -> None:
    warehouse = tempfile.mkdtemp(prefix="changes-")
    try:
        catalog = Catalog(warehouse)
        catalog.create_database("db")
        catalog.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"], options={"rowkind.field": "rk", **options}))
        table = catalog.get_table("db.t")
        open_writers: dict[int, tuple[Any, Any]] = {}
        for action, arg, batch in script:
            if action == "write":
                if arg not in open_writers:
                    wb = table.new_batch_write_builder()
                    open_writers[arg] = (wb.new_write(), wb.new_commit())
                open_writers[arg][0].write_arrow(pa.table(
                    {"id": [k for k, _, _ in batch], "v": [v for _, v, _ in batch],
                     "rk": [r for _, _, r in batch]}, schema=SCHEMA))
            elif action == "commit" and arg in open_writers:
                w, c = open_writers.pop(arg)
                messages = w.prepare_commit()
                try:
                    c.commit(messages)
                except CommitConflictError:
                    c.abort(messages)
            elif action == "compact":
                table.compact(full=bool(arg))
        if options.get("changelog-producer") == "full-compaction":
            table.compact(full=True)  # its changelog is complete at a full compaction
        t = read(table)
        assert _replay(table) == dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


PRODUCED = {
    "none-fixed": MODES["fixed"], "none-dynamic": MODES["dynamic"],
    "input": {**MODES["fixed"], "changelog-producer": "input"},
    "lookup": {**MODES["fixed"], "changelog-producer": "lookup"},
    "lookup-dynamic": {**MODES["dynamic"], "changelog-producer": "lookup"},
    "full-compaction": {**MODES["fixed"], "changelog-producer": "full-compaction"},
}


@pytest.mark.parametrize("mode", list(PRODUCED))
def test_changes_replayed_in_snapshot_order_give_the_table(mode: str) -> None:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(script=actions)
    def check(script: list[tuple[str, Any, Any]]) -> None:
        _run(PRODUCED[mode], script)

    check()


def test_a_delta_read_of_a_postpone_table_is_refused(tmp_path: Any) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"bucket": "-2"}))
    table = catalog.get_table("db.t")
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": [1], "v": [1], "rk": ["+I"]}, schema=SCHEMA))
    c.commit(w.prepare_commit())
    with pytest.raises(UnsupportedError, match="postpone"):
        table.changes(0)
