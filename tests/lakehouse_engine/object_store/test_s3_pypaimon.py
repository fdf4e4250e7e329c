"""pypaimon 2.1.0 reads, with its own S3 support, a table we wrote to an S3 warehouse."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.interop.conftest import run_pypaimon
from tests.lakehouse_engine.conftest import create_table, write
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

pytestmark = pytest.mark.interop
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def test_pypaimon_reads_our_s3_table(s3_warehouse: S3Warehouse) -> None:
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "2"})
    write(table, pa.table({"id": list(range(50)), "v": [f"a{i}" for i in range(50)]}, schema=SCHEMA))
    write(table, pa.table({"id": list(range(25, 75)), "v": [f"b{i}" for i in range(25, 75)]}, schema=SCHEMA))
    got = run_pypaimon("""
        catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"], **ARGS["options"]})
        t = catalog.get_table("db.t")
        rb = t.new_read_builder()
        rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")
        emit({"id": rows.column("id").to_pylist(), "v": rows.column("v").to_pylist()})
    """, warehouse=s3_warehouse.uri, options=s3_warehouse.options)
    assert got["id"] == list(range(75))
    assert got["v"] == [f"a{i}" for i in range(25)] + [f"b{i}" for i in range(25, 75)]
