"""A table whose stored schema holds conflicting start options (written by another engine or an
older version: create and alter refuse them here) is refused when it is opened, as Paimon 0.9's
FileStoreTableFactory refuses it at every load (tests/java/test_stored_start_conflicts_java.py).
Before, it opened and a batch read and a stream followed different options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.schema_change import SchemaChange
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


def store_options(table: Any, options: dict[str, str]) -> None:
    """Add `options` to the table's latest schema file in place, as a foreign writer could."""
    schema_dir = Path(table.path) / "schema"
    latest = max(schema_dir.glob("schema-*"), key=lambda p: int(p.name.split("-")[1]))
    data = json.loads(latest.read_text())
    data["options"].update(options)
    latest.write_text(json.dumps(data))


@pytest.mark.parametrize(("options", "named"), [
    ({"scan.mode": "latest", "scan.snapshot-id": "1"}, "'scan.snapshot-id' must not be set with scan.mode 'latest'"),
    ({"scan.snapshot-id": "1", "scan.tag-name": "t"}, "'scan.snapshot-id' and 'scan.tag-name' are both set"),
    ({"scan.mode": "LATEST-FULL", "incremental-between": "1,2"}, "'incremental-between' must not be set"),
])
def test_a_table_storing_conflicting_start_options_is_refused_at_open(
        catalog: Catalog, options: dict[str, str], named: str) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    store_options(t, options)
    with pytest.raises(InvalidOptionError, match=named) as err:
        catalog.get_table("db.t")
    assert "table db.t stores conflicting start options" in str(err.value)


def test_alter_resets_one_of_them_and_the_table_opens_again_with_its_rows(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    store_options(t, {"scan.mode": "latest", "scan.snapshot-id": "1"})
    catalog.alter_table("db.t", [SchemaChange.remove_option("scan.snapshot-id")])
    opened = catalog.get_table("db.t")
    assert opened.schema.options["scan.mode"] == "latest"
    assert "scan.snapshot-id" not in opened.schema.options
    assert read(opened).column("v").to_pylist() == ["a"]


def test_a_stored_mode_with_its_own_option_opens(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    put(t, (1, "b", "+U"))
    store_options(t, {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"})
    assert read(catalog.get_table("db.t")).column("v").to_pylist() == ["a"]


def _store_branch_options(table: Any, branch: str, options: dict[str, str]) -> None:
    schema_dir = Path(table.path) / "branch" / f"branch-{branch}" / "schema"
    latest = max(schema_dir.glob("schema-*"), key=lambda p: int(p.name.split("-")[1]))
    data = json.loads(latest.read_text())
    data["options"].update(options)
    latest.write_text(json.dumps(data))


def test_a_branch_storing_conflicting_start_options_is_refused_by_every_way_of_opening_it(
        catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    t.create_tag("v1", 1)
    t.create_branch("x", "v1")
    _store_branch_options(t, "x", {"scan.mode": "latest", "scan.snapshot-id": "1"})
    named = "table db.t\\$branch_x stores conflicting start options: option 'scan.snapshot-id' must not be set"
    with pytest.raises(InvalidOptionError, match=named):
        catalog.get_table("db.t$branch_x")
    # Before, these opened the branch and its reads followed one of the options.
    with pytest.raises(InvalidOptionError, match=named):
        t.branch_table("x")
    with pytest.raises(InvalidOptionError, match=named):
        t.copy({"branch": "x"})
    with pytest.raises(InvalidOptionError, match=named):
        catalog.get_table("db.t").copy({"scan.mode": "latest"}).branch_table("x")
    assert read(t.branch_table("main")).column("v").to_pylist() == ["a"]  # main stores none
    catalog.alter_table("db.t$branch_x", [SchemaChange.remove_option("scan.snapshot-id")])
    assert read(t.branch_table("x")).column("v").to_pylist() == ["a"]
    assert t.copy({"branch": "x"}).options.raw["scan.mode"] == "latest"
