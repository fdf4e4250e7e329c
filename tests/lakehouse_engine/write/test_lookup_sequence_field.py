"""The `lookup` changelog of a deduplicate table with `sequence.field`: a key's row is its record
with the largest sequence field, which a higher level may hold once a compaction put level 0 into
a level below that run without merging them (Paimon's ForceUpLevel0, `level0_only`). The old row
of a change is that winner, not the key's newest record, so the changes replay to the table."""

from __future__ import annotations

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import change_tuples, keyed_table, put, replay


def _levels(table: FileStoreTable) -> list[int]:
    return sorted(e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot()))


def _table(table: FileStoreTable) -> dict[int, str]:
    return {r["id"]: r["v"] for r in read(table).to_pylist()}


def test_a_normal_writer_after_level0_went_below_a_bigger_run(catalog: Catalog) -> None:
    table = keyed_table(catalog, bucket="1", **{"changelog-producer": "lookup", "sequence.field": "v"})
    put(table, *[(i, "b", "+I") for i in range(2000)])
    table.compact(full=True)
    put(table, (0, "a", "+I"))  # loses to 'b'; its commit's compaction puts it below the big run
    assert _levels(table) == [4, 5]
    put(table, (0, "a", "+I"))
    # Before: the second commit gave -U a / +U a (the newest record, not the row), replaying to 'a'.
    assert change_tuples(table, 2)[-2:] == [(6, "-U", 0, "b"), (6, "+U", 0, "b")]
    assert replay(change_tuples(table)) == _table(table)


@pytest.mark.parametrize("third", ["normal", "write-only"])
def test_write_only_level0_taken_up_below_the_winning_run(catalog: Catalog, third: str) -> None:
    table = keyed_table(catalog, bucket="1", **{"changelog-producer": "lookup", "sequence.field": "v",
                                                "num-sorted-run.compaction-trigger": "10"})
    write_only = table.copy({"write-only": "true"})
    put(write_only, (0, "b", "+I"))
    table.compact(level0_only=True)
    put(write_only, (0, "a", "+I"))
    table.compact(level0_only=True)
    assert _levels(table) == [9, 10]
    if third == "normal":
        put(table, (0, "a", "+I"))
    else:
        put(write_only, (0, "a", "+I"))
        table.compact(level0_only=True)
    assert _table(table) == {0: "b"}
    assert replay(change_tuples(table)) == {0: "b"}
