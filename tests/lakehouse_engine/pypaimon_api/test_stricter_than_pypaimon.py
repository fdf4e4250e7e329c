"""Where pypaimon 2.1.0 accepts what we refused: we accept it where Paimon (Java) does too or where
it is harmless, and keep refusing, with a clear error, what makes a table Paimon cannot read."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import CatalogFactory, InvalidOptionError, Schema
from lakehouse_engine.errors import UnsupportedFeatureError

PA_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()), ("v", pa.int64())])


@pytest.fixture
def catalog(tmp_path: Path):
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("default", False)
    return catalog


def _write(table, rows) -> None:
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pylist(rows, schema=PA_SCHEMA))
    wb.new_commit().commit(w.prepare_commit())


def _rows(table):
    rb = table.new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist(),
                  key=lambda r: (r["dt"], r["id"]))


def test_fixed_bucket_key_without_the_partition_field_keeps_each_key_per_partition(catalog) -> None:
    catalog.create_table("default.t", Schema.from_pyarrow_schema(
        PA_SCHEMA, partition_keys=["dt"], primary_keys=["id"], options={"bucket": "2"}), False)
    table = catalog.get_table("default.t")
    _write(table, [{"id": 1, "dt": "a", "v": 1}, {"id": 1, "dt": "b", "v": 2}])
    _write(table, [{"id": 1, "dt": "a", "v": 3}])
    assert _rows(table) == [{"id": 1, "dt": "a", "v": 3}, {"id": 1, "dt": "b", "v": 2}]


def test_fixed_bucket_key_without_the_partition_field_refuses_sequence_field_as_paimon(catalog) -> None:
    with pytest.raises(InvalidOptionError, match="'sequence.field' cannot be used"):
        catalog.create_table("default.s", Schema.from_pyarrow_schema(
            PA_SCHEMA, partition_keys=["dt"], primary_keys=["id"],
            options={"bucket": "2", "sequence.field": "v"}), False)


def test_snappy_avro_data_files_are_written_and_read(catalog, tmp_path: Path) -> None:
    catalog.create_table("default.av", Schema.from_pyarrow_schema(
        PA_SCHEMA, primary_keys=["id"], options={"bucket": "1", "file.format": "avro",
                                                 "file.compression": "snappy"}), False)
    table = catalog.get_table("default.av")
    _write(table, [{"id": 1, "dt": "a", "v": 1}])
    assert _rows(table) == [{"id": 1, "dt": "a", "v": 1}]
    data = next(Path(tmp_path, "default.db", "av").rglob("*.avro")).read_bytes()
    assert b"avro.codec\x0csnappy" in data


def test_snappy_avro_without_cramjam_is_refused_naming_the_extra(catalog, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cramjam", None)  # as if not installed
    with pytest.raises(InvalidOptionError, match="lakehouse-engine\\[snappy\\]"):
        catalog.create_table("default.av", Schema.from_pyarrow_schema(
            PA_SCHEMA, options={"file.format": "avro", "file.compression": "snappy"}), False)


@pytest.mark.parametrize(("schema_kwargs", "message"), [
    # Paimon 0.9 has no nullable primary keys: a null key would make a table it cannot read.
    ({"primary_keys": ["id"], "options": {"primary-key.nullable": "true"}}, "primary-key.nullable"),
    # Paimon refuses a bucketed append table without a bucket key too.
    ({"options": {"bucket": "2"}}, "needs option 'bucket-key'"),
    # pypaimon fails every read of such a table; we refuse it before anything is stored.
    ({"options": {"read.parallelism": "0"}}, "read.parallelism"),
])
def test_still_refused_at_create_time(catalog, schema_kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        catalog.create_table("default.bad", Schema.from_pyarrow_schema(PA_SCHEMA, **schema_kwargs), False)
    assert not catalog.table_exists("default.bad")


@pytest.mark.parametrize("function", ["mod", "hive"])
def test_a_postpone_bucket_table_may_name_another_bucket_function_its_fixed_writers_refuse(
        catalog, function: str) -> None:
    # pypaimon's test_postpone_rejects_unsupported_bucket_function: the table is created (Paimon
    # 1.x applies the function when it compacts), rows go to the postpone bucket; every writer
    # that would hash rows into fixed buckets refuses it, as pypaimon's does.
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("v", pa.string())])
    catalog.create_table("default.pp", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "-2", "bucket-function.type": function}), False)
    table = catalog.get_table("default.pp")
    with pytest.raises(ValueError, match="only support bucket-function.type=default"):
        table.new_postpone_fixed_bucket_write_builder().new_write()
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pylist([{"id": 1, "v": "a"}], schema=schema))
    messages = w.prepare_commit()
    assert {m.bucket for m in messages} == {-2}
    wb.new_commit().commit(messages)
    with pytest.raises(NotImplementedError, match=f"'bucket-function.type' = '{function}'"):
        table.compact(full=True)
    assert table.latest_snapshot().id == 1


def test_another_bucket_function_on_a_fixed_bucket_table_is_still_refused(catalog) -> None:
    # We would hash its keys with the default function and put them in buckets Paimon does not.
    with pytest.raises(InvalidOptionError, match="bucket-function.type"):
        catalog.create_table("default.fx", Schema.from_pyarrow_schema(
            PA_SCHEMA, primary_keys=["id"], options={"bucket": "2", "bucket-function.type": "mod"}), False)
    catalog.create_table("default.pp", Schema.from_pyarrow_schema(
        PA_SCHEMA, primary_keys=["id"], options={"bucket": "-2", "bucket-function.type": "mod"}), False)
    # A copy with fixed buckets is refused when it would write, naming the option.
    with pytest.raises(UnsupportedFeatureError, match="bucket-function.type"):
        catalog.get_table("default.pp").copy({"bucket": "2"}).new_batch_write_builder().new_write().write_arrow(
            pa.Table.from_pylist([{"id": 1, "dt": "a", "v": 1}], schema=PA_SCHEMA))


def test_a_string_sequence_group_field_orders_updates_as_paimon(catalog) -> None:
    # pypaimon's test_partial_update_with_sequence_group_raises sets a STRING sequence field,
    # which Paimon (Java) orders; we refused it before, we order it now (by UTF-8 bytes).
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.int64()), ("b", pa.string())])
    catalog.create_table("default.pu", Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={
        "bucket": "1", "merge-engine": "partial-update", "fields.b.sequence-group": "a"}), False)
    table = catalog.get_table("default.pu")
    for rows in ([{"id": 1, "a": 1, "b": "v2"}], [{"id": 1, "a": 2, "b": "v10"}], [{"id": 1, "a": 3, "b": "v3"}]):
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        wb.new_commit().commit(w.prepare_commit())
    rb = table.new_read_builder()
    assert rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist() == [{"id": 1, "a": 3, "b": "v3"}]
