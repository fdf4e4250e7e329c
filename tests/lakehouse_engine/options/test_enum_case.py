"""Paimon reads an enum option's value in any case (OptionsUtils.convertToEnum): a table Java made
with `'changelog-producer' = 'LOOKUP'` or `'scan.mode' = 'LATEST'` opens, writes and streams here
as Paimon treats it, instead of failing to open or being read as another value."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_engine import Catalog, InvalidOptionError
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


def _java_made(catalog: Catalog, **options: str) -> FileStoreTable:
    """A table whose schema file holds `options` as another engine wrote them (not checked here)."""
    table = keyed_table(catalog, "t", bucket="1")
    put(table, (1, "a", "+I"))
    path = Path(table.path) / "schema" / "schema-0"
    extra = "".join(f', "{k}": "{v}"' for k, v in options.items())
    text = path.read_text()
    assert '"bucket": "1"' in text
    path.write_text(text.replace('"bucket": "1"', '"bucket": "1"' + extra, 1))
    return catalog.get_table("db.t")


def test_an_upper_case_producer_gives_the_changelog_as_paimon_does(catalog: Catalog) -> None:
    table = _java_made(catalog, **{"changelog-producer": "LOOKUP"})
    put(table, (2, "b", "+I"))
    # Before: every write failed ('expected one of none, input, lookup, full-compaction').
    assert any(s.changelog_manifest_list for s in table.snapshots())
    # (the level-0 file written before the option gives its changelog as it goes up too)
    assert sorted((r["_row_kind"], r["id"]) for r in table.changes(1).to_pylist()) == [("+I", 1), ("+I", 2)]


@pytest.mark.parametrize(("key", "value"), [("merge-engine", "Deduplicate"), ("scan.mode", "LATEST")])
def test_a_table_with_an_enum_in_another_case_opens(catalog: Catalog, key: str, value: str) -> None:
    # Before: get_table raised InvalidOptionError.
    table = _java_made(catalog, **{key: value})
    put(table, (2, "b", "+I"))
    assert read(table).num_rows == 2


def test_scan_mode_in_upper_case_starts_where_it_says(catalog: Catalog) -> None:
    table = _java_made(catalog, **{"scan.mode": "LATEST"})
    scan = table.new_stream_read_builder().new_streaming_scan()
    assert scan.plan().snapshot is None and scan.checkpoint() == 2  # latest: only what comes after
    # Its start options are checked against the mode it names, in any case.
    with pytest.raises(InvalidOptionError, match="scan.snapshot-id.*scan.mode 'latest'"):
        table.copy({"scan.snapshot-id": "1"})


def test_an_enum_value_paimon_does_not_know_is_still_refused(catalog: Catalog) -> None:
    with pytest.raises(InvalidOptionError, match="changelog-producer.*'lookups'"):
        keyed_table(catalog, "t", **{"changelog-producer": "lookups"})
