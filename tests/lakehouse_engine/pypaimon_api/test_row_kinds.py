"""Batch reads with pypaimon's `include_row_kind`: `_row_kind` is the first column, also under an
output projection and with parallel reads."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import CatalogFactory, Schema

PA_SCHEMA = pa.schema([("user_id", pa.int64()), ("behavior", pa.string()), ("dt", pa.string())])


@pytest.fixture
def table(tmp_path: Path):
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("default", False)
    catalog.create_table("default.pk", Schema.from_pyarrow_schema(
        PA_SCHEMA, partition_keys=["dt"], primary_keys=["user_id", "dt"], options={"bucket": "2"}), False)
    table = catalog.get_table("default.pk")
    for behavior in ("v1", "v2-updated"):
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.Table.from_pylist(
            [{"user_id": i, "behavior": behavior, "dt": f"p{i % 2}"} for i in range(5)], schema=PA_SCHEMA))
        wb.new_commit().commit(w.prepare_commit())
    return table


def test_row_kind_is_the_first_column_of_serial_and_parallel_reads(table) -> None:
    rb = table.new_read_builder()
    splits = rb.new_scan().plan().splits()
    read = rb.new_read()
    read.include_row_kind = True
    serial, parallel = read.to_arrow(splits), read.to_arrow(splits, parallelism=4)
    assert serial.schema == parallel.schema
    assert serial.schema.names == ["_row_kind", "user_id", "behavior", "dt"]
    assert sorted(serial.to_pylist(), key=lambda r: r["user_id"]) == \
        [{"_row_kind": "+I", "user_id": i, "behavior": "v2-updated", "dt": f"p{i % 2}"} for i in range(5)]


def test_row_kind_survives_an_output_projection_and_batch_reader(table) -> None:
    predicate = table.new_read_builder().new_predicate_builder().equal("behavior", "v2-updated")
    rb = table.new_read_builder().with_projection(["user_id", "dt"]).with_filter(predicate)
    splits = rb.new_scan().plan().splits()
    read = rb.new_read()
    read.include_row_kind = True
    result = read.to_arrow(splits, parallelism=4)
    assert result.schema.names == ["_row_kind", "user_id", "dt"]
    assert (result.num_rows, set(result.column("_row_kind").to_pylist())) == (5, {"+I"})
    batches = read.to_arrow_batch_reader(splits).read_all()
    assert batches.schema.names == ["_row_kind", "user_id", "dt"] and batches.num_rows == 5
    read.include_row_kind = False
    assert read.to_arrow(splits).schema.names == ["user_id", "dt"]
