"""`table.compact(level0_only=True)`: a bucket's level 0 up into one new sorted run at a free level,
no run merged; a `lookup` table's gives the changelog a write-only commit left to it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, InvalidArgumentError
from tests.lakehouse_engine.conftest import create_table, read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string())])


def _write(table, ids: list[int], v: int) -> list[int]:
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": ids, "v": [v] * len(ids), "rk": ["+I"] * len(ids)}, schema=SCHEMA))
    return list(c.commit(w.prepare_commit()))


def _levels(table) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for e in table.store.manifest_io().live_entries(table.latest_snapshot()):
        out.setdefault(e.file.level, set()).add(e.file.file_name)
    return out


def _changes(table, after: int) -> list[tuple[str, int, int]]:
    return [(r["_row_kind"], r["id"], r["v"]) for r in table.changes(after).to_pylist()]


def test_level0_goes_up_run_by_run_with_its_changelog_and_sorted_runs_pile_up(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup", "write-only": "true",
        "num-sorted-run.compaction-trigger": "3"})  # levels 0..3
    [appended] = _write(table, [1, 2], 1)
    [up] = table.compact(level0_only=True)
    assert table.snapshot(up).commit_kind == "COMPACT"
    assert _changes(table, appended) == [("+I", 1, 1), ("+I", 2, 1)]
    first = _levels(table)
    assert set(first) == {3}

    [appended] = _write(table, [2, 3], 2)
    [up] = table.compact(level0_only=True)
    assert _changes(table, appended) == [("-U", 2, 1), ("+U", 2, 2), ("+I", 3, 2)]
    second = _levels(table)
    assert set(second) == {2, 3} and second[3] == first[3]  # the older run was not merged

    _write(table, [3], 3)
    table.compact(level0_only=True)
    assert set(_levels(table)) == {1, 2, 3}
    assert table.bucket_stats().column("sorted_runs").to_pylist() == [3]

    # Level 1 is taken: no level is free, level 0 stays (with its changelog) for the next compaction.
    [appended] = _write(table, [1], 4)
    assert table.compact(level0_only=True) == []
    assert table.latest_snapshot().id == appended and 0 in _levels(table)
    assert table.bucket_stats().column("sorted_runs").to_pylist() == [4]
    table.compact()
    assert _changes(table, appended) == [("-U", 1, 1), ("+U", 1, 4)]
    assert {r["id"]: r["v"] for r in read(table).to_pylist()} == {1: 4, 2: 2, 3: 3}


def test_level0_only_is_refused_with_full_and_on_an_append_table(catalog: Catalog) -> None:
    keyed = create_table(catalog, "k", SCHEMA, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "rk"})
    with pytest.raises(InvalidArgumentError, match="level0_only"):
        keyed.compact(full=True, level0_only=True)
    append = create_table(catalog, "a", SCHEMA, options={"bucket": "1", "bucket-key": "id"})
    with pytest.raises(InvalidArgumentError, match="level0_only"):
        append.compact(level0_only=True)
