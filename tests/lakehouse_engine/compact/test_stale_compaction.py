"""A dedicated compaction planned before another commit compacted its bucket away (and an expiry
deleted the files) skips that bucket; a file missing from a bucket that still lists it raises."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.compact.table_compact import plan_compaction, run_unless_stale
from lakehouse_engine.errors import DataFileMissingError
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _table_with_three_runs(catalog: Catalog):  # type: ignore[no-untyped-def]
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "write-only": "true"})
    for v in ("a", "b", "c"):
        write(table, pa.table({"id": list(range(10)), "v": [v] * 10}, schema=SCHEMA))
    return table


def test_a_task_whose_inputs_were_compacted_away_and_expired_is_skipped(catalog: Catalog) -> None:
    table = _table_with_three_runs(catalog)
    [task] = plan_compaction(table.store, full=True)
    table.compact(full=True)  # another compactor wins the bucket...
    for f in task.files:  # ...and an expiry deletes the files it replaced
        os.remove(f"{table.path}/bucket-0/{f.file_name}")
    assert run_unless_stale(table.store, task) is None
    assert sorted(read(table).column("v").to_pylist()) == ["c"] * 10


def test_a_file_missing_from_the_snapshot_that_lists_it_still_raises(catalog: Catalog) -> None:
    table = _table_with_three_runs(catalog)
    [task] = plan_compaction(table.store, full=True)
    os.remove(f"{table.path}/bucket-0/{task.files[0].file_name}")
    with pytest.raises(DataFileMissingError, match="is missing"):
        run_unless_stale(table.store, task)
