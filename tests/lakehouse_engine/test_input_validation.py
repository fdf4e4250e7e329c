"""Bad names, out-of-range options and mixed-type pandas columns are rejected with an error that
names the culprit, and nothing stored changes."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import (
    Catalog,
    InvalidIdentifierError,
    InvalidOptionError,
    Schema,
    SchemaError,
)
from tests.lakehouse_engine.conftest import snapshot_files

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])

INVISIBLE = {
    "right-to-left override": ("\u202e", "U+202E"),
    "left-to-right embedding": ("\u202a", "U+202A"),
    "first strong isolate": ("\u2068", "U+2068"),
    "pop directional isolate": ("\u2069", "U+2069"),
    "zero width space": ("\u200b", "U+200B"),
    "zero width joiner": ("\u200d", "U+200D"),
    "byte order mark": ("\ufeff", "U+FEFF"),
    "C1 control": ("\x85", "U+0085"),
    "escape": ("\x1b", "U+001B"),
    "line separator": ("\u2028", "U+2028"),
}


def _warehouse_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", sorted(INVISIBLE))
def test_names_with_invisible_characters_are_rejected_naming_the_code_point(catalog: Catalog, case: str):
    char, code_point = INVISIBLE[case]
    root = Path(catalog.root)
    before = _warehouse_files(root)
    with pytest.raises(InvalidIdentifierError, match=rf"table name .* {re.escape(code_point)} "):
        catalog.create_table(f"db.ord{char}ers", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    with pytest.raises(InvalidIdentifierError, match=rf"database name .* {re.escape(code_point)} "):
        catalog.create_database(f"sh{char}op")
    assert _warehouse_files(root) == before
    assert catalog.list_databases() == ["db"]


def test_printable_unicode_names_are_accepted(catalog: Catalog):
    catalog.create_table("db.bestellungen_ü_日本", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    table = catalog.get_table("db.bestellungen_ü_日本")
    assert snapshot_files(table)  # its schema file was written


OUT_OF_RANGE = {
    "file.compression.zstd-level": (["0", "23", "-1"], "between 1 and 22"),
    "bucket": (["0", "-3", "2147483648"], "bucket|Java int"),
    "dynamic-bucket.max-buckets": (["0", "-2"], "positive bucket count or -1"),
    "dynamic-bucket.target-row-num": (["0", "9223372036854775808"], "greater than 0|Java long"),
    "num-levels": (["1", "0"], "at least 2"),
    "commit.max-retries": (["-1", "99999999999"], "0 or greater|Java int"),
    "snapshot.num-retained.min": (["0"], "greater than 0"),
    "manifest.merge-min-count": (["0"], "greater than 0"),
    "num-sorted-run.compaction-trigger": (["0", "4294967296"], "greater than 0|Java int"),
    "write-buffer-size": (["0 mb", "9999999 tb"], "greater than 0|Java long"),
    "target-file-size": (["0"], "greater than 0"),
    "data-file.prefix": (["../x-", "a/b", ""], "file name part"),
    "partition.default-name": (["..", "x/y"], "file name part"),
}


@pytest.mark.parametrize("key", sorted(OUT_OF_RANGE))
def test_out_of_range_options_fail_at_create_time_naming_option_and_range(catalog: Catalog, key: str):
    values, allowed = OUT_OF_RANGE[key]
    root = Path(catalog.root)
    before = _warehouse_files(root)
    for value in values:
        schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={key: value})
        with pytest.raises(InvalidOptionError, match=rf"option '{re.escape(key)}' .*({allowed})"):
            catalog.create_table("db.t", schema)
        assert _warehouse_files(root) == before
        assert catalog.list_tables("db") == []


@pytest.mark.parametrize(("key", "value"), [("file.compression.zstd-level", "1"), ("file.compression.zstd-level", "22"),
                                            ("bucket", "-2"), ("bucket", "2147483647"), ("num-levels", "2"),
                                            ("dynamic-bucket.max-buckets", "-1"), ("commit.max-retries", "0"),
                                            ("data-file.prefix", "part-")])
def test_options_at_the_edge_of_their_range_are_accepted(catalog: Catalog, key: str, value: str):
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={key: value}))
    assert catalog.get_table("db.t").options.raw[key] == value


def test_an_out_of_range_option_in_a_dynamic_copy_is_rejected(catalog: Catalog):
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    table = catalog.get_table("db.t")
    with pytest.raises(InvalidOptionError, match="file.compression.zstd-level"):
        table.copy({"file.compression.zstd-level": "99"})


MIXED = {
    "int and str": ([1, "a", 2.5], "int, str, float"),
    "str and int": (["x", 3, None], "str, int"),
    "str and bytes": (["x", b"a", None], "str, bytes"),
}


@pytest.mark.parametrize("case", sorted(MIXED))
def test_write_pandas_with_a_mixed_type_column_names_the_column_and_types(catalog: Catalog, case: str):
    pd = pytest.importorskip("pandas")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    table = catalog.get_table("db.t")
    values, types = MIXED[case]
    before = snapshot_files(table)
    wb = table.new_batch_write_builder()
    write = wb.new_write()
    with pytest.raises(SchemaError, match=rf"column 'v' mixes values of types {types} \(table db\.t stores it as string\)"):
        write.write_pandas(pd.DataFrame({"id": [1, 2, 3], "v": values}))
    assert write.prepare_commit() == []
    write.close()
    assert snapshot_files(table) == before


def test_write_pandas_with_one_type_per_column_writes(catalog: Catalog):
    pd = pytest.importorskip("pandas")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    table = catalog.get_table("db.t")
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_pandas(pd.DataFrame({"id": [1, 2], "v": ["a", None]}))
    commit.commit(write.prepare_commit())
    rb = table.new_read_builder()
    assert sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"}, {"id": 2, "v": None}]


@pytest.mark.parametrize("case", ["right-to-left override", "zero width space", "C1 control"])
def test_tag_names_with_invisible_characters_are_rejected_naming_the_code_point(catalog: Catalog, case: str):
    char, code_point = INVISIBLE[case]
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    table = catalog.get_table("db.t")
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    commit.commit(write.prepare_commit())
    before = snapshot_files(table)
    with pytest.raises(InvalidIdentifierError, match=rf"tag name .* {re.escape(code_point)} "):
        table.create_tag(f"v1{char}")
    assert snapshot_files(table) == before
    assert table.tags() == {}
