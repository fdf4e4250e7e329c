"""Raw-convertible splits (Paimon's `DataSplit.rawConvertible`): which splits a plain parquet reader
may read as they are, and that their files' value columns are exactly the rows a read returns."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_engine import Catalog, SchemaChange
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, rows, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.string()), pa.field("n", pa.int64())])


def data(ids: range, tag: str) -> pa.Table:
    return pa.table({"id": list(ids), "dt": [f"d{i % 2}" for i in ids], "v": [f"{tag}-{i}" for i in ids],
                     "n": list(ids)}, schema=SCHEMA)


def orders(catalog: Catalog, **options: Any) -> FileStoreTable:
    return create_table(catalog, "t", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": 2, "write-only": "true", **options})


def splits(t: FileStoreTable) -> list[DataSplit]:
    return t.new_read_builder().new_scan().plan().splits()


def as_stored(t: FileStoreTable, split: DataSplit) -> pa.Table:
    """A split's rows read straight from its parquet files, value columns only."""
    names = t.schema.field_names
    return pa.concat_tables([pq.read_table(p, columns=names).cast(t.schema.arrow_schema())
                             for p in split.file_paths])


def test_a_compacted_table_is_raw_convertible_and_its_files_hold_the_read_rows(catalog: Catalog) -> None:
    t = orders(catalog)
    write(t, data(range(0, 60), "a"))
    write(t, data(range(30, 90), "b"))
    assert not all(s.raw_convertible for s in splits(t))  # two level-0 runs overlap
    t.compact(full=True)
    planned = splits(t)
    assert planned and all(s.raw_convertible for s in planned)
    read = t.new_read_builder().new_read()
    for s in planned:
        assert rows(as_stored(t, s), "id") == rows(read.read_split(s), "id")
    assert sum(s.row_count for s in planned) == 90


def test_one_write_of_unique_keys_is_raw_convertible(catalog: Catalog) -> None:
    t = orders(catalog)
    write(t, data(range(0, 40), "a"))
    assert all(s.raw_convertible for s in splits(t))


def test_a_file_with_retractions_is_not_raw_convertible(catalog: Catalog) -> None:
    schema = SCHEMA.append(pa.field("kind", pa.string()))
    t = create_table(catalog, "k", schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": 1, "rowkind.field": "kind"})
    write(t, pa.table({"id": [1, 2, 3], "dt": ["d"] * 3, "v": ["x"] * 3, "n": [1, 2, 3],
                       "kind": ["+I", "+I", "+I"]}, schema=schema))
    assert all(s.raw_convertible for s in splits(t))
    write(t, pa.table({"id": [2], "dt": ["d"], "v": [None], "n": [None], "kind": ["-D"]}, schema=schema))
    t.compact(full=True)  # one file again, at the top level: the delete is dropped
    assert all(s.raw_convertible for s in splits(t))
    t2 = create_table(catalog, "k2", schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                      options={"bucket": 1, "rowkind.field": "kind"})
    write(t2, pa.table({"id": [5], "dt": ["d"], "v": [None], "n": [None], "kind": ["-D"]}, schema=schema))
    (split,) = splits(t2)
    assert split.files[0].delete_row_count == 1 and not split.raw_convertible
    assert t2.new_read_builder().new_read().read_split(split).num_rows == 0


def test_aggregation_tables_are_never_raw_convertible(catalog: Catalog) -> None:
    t = orders(catalog, **{"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
                           "fields.v.aggregate-function": "last_value"})
    write(t, data(range(0, 10), "a"))
    t.compact(full=True)
    assert not any(s.raw_convertible for s in splits(t))


def test_files_of_an_older_schema_are_raw_convertible_only_when_their_columns_read_by_name(
        catalog: Catalog) -> None:
    t = orders(catalog)
    write(t, data(range(0, 20), "a"))
    catalog.alter_table("db.t", [SchemaChange.add_column("extra", pa.int32()),
                                 SchemaChange.set_option("snapshot.num-retained.min", "5")])
    t = catalog.get_table("db.t")
    assert all(s.raw_convertible for s in splits(t))  # no column of that name: nulls, as the engine
    catalog.alter_table("db.t", [SchemaChange.rename_column("v", "label")])
    t = catalog.get_table("db.t")
    assert not any(s.raw_convertible for s in splits(t))  # `label` is column `v` in the files
    t.compact(full=True)  # rewritten with the latest schema
    assert all(s.raw_convertible for s in splits(t))
    catalog.alter_table("db.t", [SchemaChange.drop_column("n")])
    catalog.alter_table("db.t", [SchemaChange.add_column("n", pa.string())])
    t = catalog.get_table("db.t")
    assert not any(s.raw_convertible for s in splits(t))  # a new `n`: the files' `n` is the old one
    assert set(t.new_read_builder().new_read().to_arrow(splits(t)).column("n").to_pylist()) == {None}


def test_orc_files_are_not_raw_convertible(catalog: Catalog) -> None:
    t = orders(catalog, **{"file.format": "orc"})
    write(t, data(range(0, 20), "a"))
    assert not any(s.raw_convertible for s in splits(t))


def test_append_table_files_are_raw_convertible(catalog: Catalog) -> None:
    t = create_table(catalog, "log", SCHEMA, options={"bucket": -1})
    write(t, data(range(0, 20), "a"))
    write(t, data(range(0, 20), "b"))
    planned = splits(t)
    assert planned and all(s.raw_convertible for s in planned)
