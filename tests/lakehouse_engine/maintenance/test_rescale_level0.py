"""Rescale of a table holding level-0 rows that reads or changelogs skip: a write-only writer's
level 0 of a deletion-vector table (invisible to its reads) or of a `lookup` table (its changelog
not given yet), on tables with and without the `write-only` option. No acknowledged row is lost,
every row is readable right after the rescale, and the changes replay strictly to the table (no
row's `+I` given twice by the rewritten files)."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import (
    change_tuples,
    keyed_table,
    put,
    strict_replay,
)

SETUPS = {
    "dv": {"deletion-vectors.enabled": "true"},
    "dv, lookup": {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
    "lookup": {"changelog-producer": "lookup"},
    "lookup, first-row": {"changelog-producer": "lookup", "merge-engine": "first-row"},
    "lookup, partial-update": {"changelog-producer": "lookup", "merge-engine": "partial-update"},
}


def _rows(table: FileStoreTable) -> dict[int, Any]:
    return {r["id"]: r["v"] for r in read(table).to_pylist()}



@pytest.mark.parametrize("write_only", [False, True], ids=["table", "write-only table"])
@pytest.mark.parametrize("setup", list(SETUPS))
def test_rescale_keeps_level0_rows_and_gives_no_change_twice(catalog: Catalog, setup: str, write_only: bool) -> None:
    options = {**SETUPS[setup], **({"write-only": "true"} if write_only else {})}
    table = keyed_table(catalog, bucket="2", **options)
    put(table, (1, "a", "+I"))
    table.compact(full=True)
    put(table.copy({"write-only": "true"}), (1, "b", "+I"), (2, "c", "+I"))
    expected = {1: "a", 2: "c"} if "first-row" in setup else {1: "b", 2: "c"}
    table.rescale(4)
    table = catalog.get_table("db.t")
    # Before: a DV table's rescale read its rows without that level 0 and its OVERWRITE dropped
    # it (rows lost); a write-only table's rescale left its rows in level 0 (a DV table read
    # empty until a compaction; a lookup table's compaction gave every row's +I again).
    assert _rows(table) == expected
    assert {e.bucket for e in table.store.manifest_io().live_entries(table.latest_snapshot())} <= {0, 1, 2, 3}
    table.compact(full=True)
    table = catalog.get_table("db.t")
    assert _rows(table) == expected
    if "lookup" in setup:
        assert strict_replay((kind, key, value) for _, kind, key, value in change_tuples(table)) == expected
