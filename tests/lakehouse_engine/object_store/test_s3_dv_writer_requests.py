"""A deletion-vector stream writer's commit on S3, counted at the server: bounded and no listing. (Its
compaction at commit reuses the flush lookup's read of the table, as does the lookup's staleness base,
tests/lakehouse_engine/write/test_latest_state.py: 66 requests a commit before, 61 after.)"""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _rows(start: int) -> pa.Table:
    ids = list(range(start, start + 100))
    return pa.table({"id": ids, "v": [f"x{start}"] * 100}, schema=SCHEMA)


@pytest.mark.parametrize("producer", ["lookup", "none"])
def test_a_dv_stream_writers_commit_reads_the_table_state_once(s3_warehouse: S3Warehouse, producer: str) -> None:
    log = s3_warehouse.server.log
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={
        "bucket": "1", "deletion-vectors.enabled": "true", "changelog-producer": producer})
    wb = table.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    per_commit = []
    for k in range(1, 5):
        start = log.mark()
        w.write_arrow(_rows(k * 50))
        c.commit(w.prepare_commit(k), k)
        per_commit.append(log.since(start, s3_warehouse.bucket))
    w.close()
    assert read(table).num_rows == 250
    last = per_commit[-1]
    s3_warehouse.server.report[f"dv_{producer}_commit"] = len(last)
    assert not [r for r in last if "list-type" in r[2]], last
    # (Measured: 61 with the changelog, 66 before its reads were shared; 53 without; an APPEND and a COMPACT snapshot each.)
    assert len(last) <= {"lookup": 62, "none": 54}[producer], sorted((r[0], r[1].rsplit("/", 1)[-1]) for r in last)
