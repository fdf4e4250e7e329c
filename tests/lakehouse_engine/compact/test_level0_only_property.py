"""Property: `table.compact(level0_only=True)` mixed into any order of write-only and normal writes
and normal and full compactions, for every merge engine with and without deletion vectors, on a
`lookup` table of two buckets: the changes replay strictly (no change missing or given twice) to
the table above level 0 after every step, and a stream started after any step ends at the table.
It found the `sequence.field` lookup taking a key's newest record for its row (test_lookup_sequence_field.py)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import kinds_keys_values, strict_replay

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string())])

rows = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 99), st.sampled_from(["+I", "+I", "-D"])),
                min_size=1, max_size=6)
steps = st.lists(st.one_of(
    st.tuples(st.just("write-only"), rows),
    st.tuples(st.just("write"), rows),
    st.tuples(st.just("compact"), st.sampled_from(["level0", "level0", "normal", "full"])),
), min_size=1, max_size=12)

ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                    "aggregation.remove-record-on-delete": "true"},
    "first-row": {"merge-engine": "first-row", "ignore-delete": "true"},
    "sequence-field": {"sequence.field": "v"},
    "deletion-vectors": {"deletion-vectors.enabled": "true"},
    "deletion-vectors, sequence-field": {"deletion-vectors.enabled": "true", "sequence.field": "v"},
    "partial-update, sequence-field": {"merge-engine": "partial-update", "sequence.field": "v",
                                       "partial-update.remove-record-on-delete": "true"},
    # (first-row refuses deletion vectors, as Paimon): its writers' compactions at every commit.
    "first-row, trigger 2": {"merge-engine": "first-row", "ignore-delete": "true",
                             "num-sorted-run.compaction-trigger": "2"},
}


def _above_level0(table: FileStoreTable) -> dict[int, Any]:
    scan = TableScan(table.store, None, None)
    scan.entry_filter = lambda e: e.file.level > 0
    got = table.new_read_builder().new_read().to_arrow(scan.plan().splits())
    return {r["id"]: r["v"] for r in got.to_pylist()}



def _run(options: dict[str, str], script: list[tuple[str, Any]]) -> None:
    warehouse = tempfile.mkdtemp(prefix="level0-only-")
    try:
        catalog = Catalog(warehouse)
        catalog.create_database("db")
        catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
            "bucket": "2", "rowkind.field": "rk", "changelog-producer": "lookup",
            "num-sorted-run.compaction-trigger": "3", **options}))
        table = catalog.get_table("db.t")
        streams: list[tuple[Any, Any, list[pa.Table]]] = []
        for action, arg in script:
            if action == "compact":
                table.compact(full=arg == "full", level0_only=arg == "level0")
            else:
                writing = table.copy({"write-only": "true"}) if action == "write-only" else table
                wb = writing.new_batch_write_builder()
                w, c = wb.new_write(), wb.new_commit()
                w.write_arrow(pa.table({"id": [k for k, _, _ in arg], "v": [v for _, v, _ in arg],
                                        "rk": [r for _, _, r in arg]}, schema=SCHEMA))
                c.commit(w.prepare_commit())
            assert strict_replay(kinds_keys_values(table.changes(0), "v")) == _above_level0(table), f"after {action} {arg}"
            builder = table.new_stream_read_builder().with_include_row_kind()
            scan, read_ = builder.new_streaming_scan(), builder.new_read()
            streams.append((scan, read_, [read_.to_arrow(scan.plan().splits())]))
        table.compact(full=True)
        final = {r["id"]: r["v"] for r in read(table).to_pylist()}
        assert strict_replay(kinds_keys_values(table.changes(0), "v")) == final, "after the last compaction"
        for i, (scan, read_, seen) in enumerate(streams):
            while (plan := scan.plan()).snapshot_id is not None:
                seen.append(read_.to_arrow(plan.splits()))
            assert strict_replay(kinds_keys_values(pa.concat_tables(seen), "v")) == final, f"a stream started after step {i}"
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_level0_only_compactions_among_writes_and_compactions_change_the_table_as_their_changes_say(
        engine: str) -> None:
    @settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(script=steps)
    def check(script: list[tuple[str, Any]]) -> None:
        _run(ENGINES[engine], script)

    check()
