"""Property: any interleaving of writers of the same keys and compactions reads as the commits in
snapshot order, before and after `compact(full=True)`."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, CommitConflictError, Schema
from tests.lakehouse_engine.conftest import read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string())])
WRITERS = 3

ops = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1000), st.sampled_from(["+I", "+U", "-D"])),
               min_size=1, max_size=4)
actions = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, WRITERS - 1), ops),
    st.tuples(st.just("commit"), st.integers(0, WRITERS - 1), st.just(None)),
    st.tuples(st.just("compact"), st.booleans(), st.just(None)),
), min_size=1, max_size=24)

MODES = {
    # The low trigger makes writers compact at commit, so dropped writer compactions are exercised.
    "fixed": {"bucket": "2", "num-sorted-run.compaction-trigger": "2"},
    "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "3"},
    "postpone": {"bucket": "-2", "postpone.default-bucket-num": "2"},
}


def _run(options: dict[str, str], script: list[tuple[str, Any, Any]]) -> None:
    warehouse = tempfile.mkdtemp(prefix="same-keys-")
    try:
        catalog = Catalog(warehouse)
        catalog.create_database("db")
        catalog.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"], options={"rowkind.field": "rk", **options}))
        table = catalog.get_table("db.t")
        model: dict[int, int] = {}
        open_writers: dict[int, tuple[Any, Any, list[tuple[int, int, str]]]] = {}
        for action, arg, batch in script:
            if action == "write":
                if arg not in open_writers:
                    wb = table.new_batch_write_builder()
                    open_writers[arg] = (wb.new_write(), wb.new_commit(), [])
                w, _, pending = open_writers[arg]
                w.write_arrow(pa.table({"id": [k for k, _, _ in batch], "v": [v for _, v, _ in batch],
                                        "rk": [r for _, _, r in batch]}, schema=SCHEMA))
                pending.extend(batch)
            elif action == "commit" and arg in open_writers:
                w, c, pending = open_writers.pop(arg)
                messages = w.prepare_commit()
                try:
                    c.commit(messages)
                except CommitConflictError:
                    c.abort(messages)  # dynamic bucket: another writer assigned new keys first
                    continue
                for k, v, kind in pending:  # acknowledged: applied in snapshot order
                    if kind == "-D":
                        model.pop(k, None)
                    else:
                        model[k] = v
            elif action == "compact":
                table.compact(full=bool(arg))
        if options["bucket"] == "-2":
            table.compact()  # postponed rows become visible
        expected = sorted(model.items())
        t = read(table)
        assert sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)) == expected
        table.compact(full=True)
        t = read(table)
        assert sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)) == expected
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


@pytest.mark.parametrize("mode", list(MODES))
def test_interleaved_writers_read_as_commits_in_snapshot_order(mode: str) -> None:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(script=actions)
    def check(script: list[tuple[str, Any, Any]]) -> None:
        _run(MODES[mode], script)

    check()
