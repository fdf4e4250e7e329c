"""Batch incremental reads over ranges whose snapshots expired while their changelog lived on."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError, SnapshotNotExistError
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


def _read(table: Any, **options: str) -> list[tuple[int, str]]:
    rb = table.copy(options).new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted((r["id"], r["v"]) for r in rows.to_pylist())


@pytest.fixture
def expired(catalog: Catalog) -> Any:
    """A lookup table whose snapshots 1-4 expired; their changelog is long-lived."""
    t = keyed_table(catalog, **{"changelog-producer": "lookup", "snapshot.num-retained.min": "1",
                                "snapshot.num-retained.max": "2", "changelog.num-retained.min": "1",
                                "changelog.num-retained.max": "10"})
    put(t, *[(i, f"a{i}", "+I") for i in range(6)])       # 1 APPEND, 2 COMPACT
    put(t, *[(i, f"b{i}", "+I") for i in range(3, 9)])    # 3, 4
    put(t, *[(i, f"c{i}", "+I") for i in range(0, 4)])    # 5, 6
    assert [s.id for s in t.snapshots()] == [5, 6]
    return t


def test_a_delta_over_expired_snapshots_of_a_producer_table_names_the_range(expired: Any) -> None:
    # Their data files went with the snapshots (a compaction replaced them): the read named a
    # data file missing, "the manifest or the file is damaged", on a healthy table.
    with pytest.raises(InvalidOptionError, match=r"\(2, 4\] is outside the retained snapshots.*'changelog'"):
        _read(expired, **{"incremental-between": "2,4", "incremental-between-scan-mode": "delta"})


def test_the_changelog_of_the_same_range_reads_through_the_long_lived_changelog(expired: Any) -> None:
    assert _read(expired, **{"incremental-between": "2,4", "incremental-between-scan-mode": "changelog"}) \
        == [(i, f"b{i}") for i in range(3, 9)]
    assert _read(expired, **{"incremental-between": "4,6", "incremental-between-scan-mode": "delta"}) \
        == [(i, f"c{i}") for i in range(4)]


def test_the_delta_changes_of_an_expired_snapshot_name_it(expired: Any) -> None:
    # The change read (`table.changes`, the Spark source, `lakehouse changes --mode delta`) read the
    # long-lived changelog's delta list the same way: a data file "missing, damaged".
    with pytest.raises(SnapshotNotExistError, match=r"snapshot 3 of table db.t expired: .*read its changes as 'changelog'"):
        expired.changes(2, 4, mode="delta")
    assert expired.changes(2, 4, mode="changelog").num_rows == 9
    assert expired.changes(4, 6, mode="delta").num_rows == 4
