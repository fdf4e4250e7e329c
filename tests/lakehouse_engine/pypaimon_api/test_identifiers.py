"""Identifiers as pypaimon 2.1.0 and Paimon (Java) parse them: backtick-quoted parts, the split on
the first period, branches and system tables encoded in the object, the `unknown` database."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import (
    CatalogFactory,
    Identifier,
    InvalidIdentifierError,
    Schema,
    TableNotExistError,
    UnsupportedError,
)


def test_backtick_quoted_parts_may_hold_periods() -> None:
    ident = Identifier.from_string("`db.name`.`table.name`")
    assert (ident.get_database_name(), ident.get_table_name()) == ("db.name", "table.name")
    assert Identifier.from_string("`my.database`.simple_table").get_database_name() == "my.database"


def test_unquoted_text_splits_on_the_first_period_as_java_does() -> None:
    ident = Identifier.from_string("mydb.my.table.name")
    assert (ident.get_database_name(), ident.get_object_name()) == ("mydb", "my.table.name")


@pytest.mark.parametrize("text", ["", "   ", "nodot", "`db.t", "a.b.c`"])
def test_malformed_identifiers_raise_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        Identifier.from_string(text)


@pytest.mark.parametrize("table", ["a/b", "..", ".", "a\\b", "t\x00"])
def test_a_name_is_never_a_path(table: str) -> None:
    with pytest.raises(InvalidIdentifierError):
        Identifier.create("db", table)


def test_unknown_database_drops_the_database_from_the_full_name() -> None:
    assert Identifier.create("unknown", "mytable").get_full_name() == "mytable"
    assert Identifier.create("db", "mytable").get_full_name() == "db.mytable"


def test_branch_and_system_table_are_encoded_in_the_object() -> None:
    ident = Identifier("db", "orders", branch="dev", system_table="snapshots")
    assert ident.get_object_name() == "orders$branch_dev$snapshots"
    assert (ident.get_table_name(), ident.get_branch_name(), ident.get_system_table_name()) == \
        ("orders", "dev", "snapshots")
    assert Identifier("db", "orders", branch="main").get_object_name() == "orders"
    decoded = Identifier.create("db", "orders$snapshots")
    assert decoded.is_system_table() and decoded.get_table_name() == "orders"
    assert Identifier("db", "orders$branch_dev") == Identifier("db", "orders", branch="dev")
    malformed = Identifier.create("db", "orders$a$b")  # builds, as in Java and pypaimon
    with pytest.raises(ValueError, match="one '\\$' separator"):
        malformed.is_system_table()
    ident = Identifier.create("db", "orders")
    ident.branch = "b1"
    assert ident.get_object_name() == "orders$branch_b1"


def test_catalog_serves_tables_whose_names_hold_periods(tmp_path) -> None:
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("my.db", False)
    catalog.create_table("`my.db`.`t.1`", Schema.from_pyarrow_schema(pa.schema([("a", pa.int64())])), False)
    table = catalog.get_table(Identifier.create("my.db", "t.1"))
    assert catalog.list_tables("my.db") == ["t.1"]
    assert table.identifier.get_full_name() == "my.db.t.1"
    assert (tmp_path / "my.db.db" / "t.1" / "schema" / "schema-0").is_file()


def test_catalog_refuses_system_tables_and_serves_branches(tmp_path) -> None:
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("db", False)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(pa.schema([("a", pa.int64())])), False)
    with pytest.raises(UnsupportedError, match="names a system table"):
        catalog.get_table("db.t$snapshots")
    with pytest.raises(TableNotExistError, match="branch"):
        catalog.get_table("db.t$branch_dev")  # not created yet
    catalog.create_branch("db.t", "dev")
    assert catalog.get_table("db.t$branch_dev").branch == "dev"
