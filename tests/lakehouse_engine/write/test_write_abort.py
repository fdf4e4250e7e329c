"""TableWrite.abort() with no messages (pypaimon's call): the files it wrote go, committed ones stay."""

from __future__ import annotations

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids, pa.int64())}, schema=SCHEMA)


def test_abort_after_the_writers_compaction_moved_a_committed_file_up_keeps_that_file(catalog: Catalog) -> None:
    # A tiny buffer flushes at once; two sorted runs reach the stop trigger and the writer compacts,
    # moving the committed file up a level without rewriting it (it does not overlap the new run).
    table = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "write-buffer-size": "1 kb", "num-sorted-run.compaction-trigger": "1",
        "num-sorted-run.stop-trigger": "2", "compaction.file-size": "1 b"})
    write(table, _rows(range(100)))
    committed = {f.file_name for f in table.new_read_builder().new_scan().plan().splits()[0].files}
    w = table.new_batch_write_builder().new_write()
    w.write_arrow(_rows(range(1000, 1100)))
    moved = [f for b in w._writers.values() for f in b.compact_after if f.file_name in committed]
    assert moved, "the writer's compaction did not move the committed file up: the test proves nothing"
    w.abort()
    assert read(table).column("id").to_pylist() == list(range(100))
