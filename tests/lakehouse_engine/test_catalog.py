"""Catalog: databases and tables under a warehouse, as pypaimon's filesystem catalog lays them out."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CatalogFactory, LakehouseError, Schema, TableAlreadyExistError
from lakehouse_engine.options import CoreOptions, parse_duration_ms, parse_memory_size

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def test_databases_and_tables_lifecycle(tmp_path: Path) -> None:
    cat = CatalogFactory.create({"warehouse": str(tmp_path)})
    cat.create_database("shop")
    cat.create_database("shop", ignore_if_exists=True)
    with pytest.raises(LakehouseError):
        cat.create_database("shop")
    cat.create_table("shop.orders", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"bucket": "2"}))
    with pytest.raises(TableAlreadyExistError):
        cat.create_table("shop.orders", Schema.from_pyarrow_schema(SCHEMA))
    cat.create_table("shop.orders", Schema.from_pyarrow_schema(SCHEMA), ignore_if_exists=True)
    assert cat.list_databases() == ["shop"] and cat.list_tables("shop") == ["orders"]
    assert (tmp_path / "shop.db" / "orders" / "schema" / "schema-0").is_file()
    table = cat.get_table("shop.orders")
    assert table.schema.primary_keys == ("id",) and table.schema.options == {"bucket": "2"}
    assert table.schema.fields[0].type.to_string() == "BIGINT NOT NULL"
    with pytest.raises(LakehouseError, match="not empty"):
        cat.drop_database("shop")
    cat.drop_table("shop.orders")
    assert cat.list_tables("shop") == []
    cat.drop_database("shop")
    assert cat.list_databases() == []


def test_file_uri_warehouse(tmp_path: Path) -> None:
    cat = Catalog(f"file://{tmp_path}")
    cat.create_database("d")
    assert (tmp_path / "d.db").is_dir()


def test_unknown_options_are_kept(tmp_path: Path) -> None:
    cat = Catalog(str(tmp_path))
    cat.create_database("d")
    cat.create_table("d.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"],
                                                       options={"bucket": "1", "my.custom.flag": "x"}))
    assert cat.get_table("d.t").schema.options["my.custom.flag"] == "x"


@pytest.mark.parametrize("text, expected", [("256 mb", 256 << 20), ("128MB", 128 << 20), ("1024", 1024),
                                            ("1 gb", 1 << 30), ("4kb", 4096)])
def test_memory_sizes(text: str, expected: int) -> None:
    assert parse_memory_size(text) == expected


@pytest.mark.parametrize("text, expected", [("1 h", 3_600_000), ("10 s", 10_000), ("100ms", 100),
                                            ("2 min", 120_000), ("1d", 86_400_000)])
def test_durations(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected


def test_paimon_defaults() -> None:
    opts = CoreOptions({})
    assert opts.bucket == -1
    assert opts.stop_trigger == 8 and opts.num_levels == 6
    assert opts.target_file_size(True) == 128 << 20 and opts.target_file_size(False) == 256 << 20
    assert CoreOptions({"num-sorted-run.compaction-trigger": "3"}).stop_trigger == 6
