"""Rollback to a snapshot or a tag: later snapshots, their tags and files go; readers see the old
state or the new one, never anything in between."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse_engine import Catalog, CommitConflictError, LakehouseError, SnapshotNotExistError
from lakehouse_engine.maintenance.tags import TagNotExistError
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import write
from tests.lakehouse_engine.maintenance.helpers import (
    batch,
    expected_files,
    files_on_disk,
    fresh,
    keyed_table,
    on_io,
    state,
    upsert,
)

WRITE_ONLY = {"write-only": "true"}


def history(table: FileStoreTable, n: int) -> dict[int, dict[int, int]]:
    states = {}
    for i in range(n):
        upsert(table, [i, i + 1, 100], i)
        states[table.latest_snapshot().id] = state(table)
    return states


def assert_clean(table: FileStoreTable) -> None:
    assert files_on_disk(table) == expected_files(table)


def hint(table: FileStoreTable, name: str) -> str:
    return (Path(table.path_factory.snapshot_dir) / name).read_text()


def test_rollback_to_a_snapshot_removes_later_snapshots_and_their_files(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = history(table, 6)
    table.rollback_to(3)
    assert table.snapshot_manager().list_snapshot_ids() == [1, 2, 3]
    assert state(table) == states[3]
    assert hint(table, "LATEST") == "3"
    assert_clean(table)
    upsert(table, [42], 42)  # a writer carries on from the rolled-back state
    assert table.latest_snapshot().id == 4
    assert state(table) == {**states[3], 42: 42}
    assert_clean(table)


def test_rollback_keeps_files_the_target_shares_with_compactions_after_it(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={**WRITE_ONLY, "compaction.file-size": "1 b"})
    states = history(table, 3)
    table.compact(full=True)  # upgrades or rewrites snapshot 3's files
    write(table, batch([1, 2], 77), overwrite={})
    table.rollback_to(3)
    assert state(table) == states[3]
    assert_clean(table)


def test_rollback_to_a_tag_removes_the_tags_of_later_snapshots(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = history(table, 5)
    for name, sid in (("one", 1), ("two", 2), ("four", 4)):
        table.create_tag(name, sid)
    table.rollback_to("two")
    assert state(table) == states[2]
    assert sorted(table.tags()) == ["one", "two"]
    assert_clean(table)


def test_rollback_to_a_tag_whose_snapshot_expired_restores_the_snapshot(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = history(table, 6)
    table.create_tag("v2", 2)
    tag_json = json.loads((Path(table.path) / "tag" / "tag-v2").read_text())
    table.expire_snapshots(retain_max=2)
    table.rollback_to("v2")
    assert table.snapshot_manager().list_snapshot_ids() == [2]
    assert json.loads(Path(table.path_factory.snapshot_path(2)).read_text()) == tag_json
    assert hint(table, "EARLIEST") == "2" and hint(table, "LATEST") == "2"
    assert state(table) == states[2]
    assert_clean(table)
    upsert(table, [9], 9)
    assert table.snapshot_manager().list_snapshot_ids() == [2, 3]
    assert state(table) == {**states[2], 9: 9}
    assert_clean(table)


def test_rollback_by_id_to_an_expired_snapshot_uses_a_tag_holding_it(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = history(table, 5)
    table.create_tag("keep", 2)
    table.expire_snapshots(retain_max=1)
    table.rollback_to(2)
    assert state(table) == states[2]
    assert_clean(table)


def test_rollback_to_the_latest_snapshot_changes_nothing(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    history(table, 3)
    before = files_on_disk(table)
    table.rollback_to(3)
    assert files_on_disk(table) == before


@pytest.mark.parametrize("target, error, message", [
    (9, SnapshotNotExistError, "cannot roll back table db.t to snapshot 9: it doesn't exist .snapshots 2..3 exist"),
    (1, SnapshotNotExistError, "snapshot 1: it doesn't exist .* and no tag holds it"),
    ("nope", TagNotExistError, "tag 'nope' of table db.t doesn't exist"),
    (2.0, LakehouseError, "a snapshot id .int. or a tag name .str."),
])
def test_rollback_to_something_unknown_changes_nothing(catalog: Catalog, target, error, message) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    history(table, 3)
    table.expire_snapshots(retain_max=2)
    before = files_on_disk(table)
    with pytest.raises(error, match=message):
        table.rollback_to(target)
    assert files_on_disk(table) == before


@pytest.mark.parametrize("target", [4, "tagged-1"])
def test_readers_see_the_old_state_or_the_new_one_at_every_step(catalog: Catalog, target) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = history(table, 6)
    table.create_tag("tagged-1", 1)
    table.expire_snapshots(retain_max=4)  # 3..6 remain; tag 1's snapshot is gone
    old, new = states[6], states[1 if target == "tagged-1" else 4]
    seen = []

    def reader() -> None:
        seen.append(state(fresh(table)))

    on_io(table, reader).rollback_to(target)
    reader()
    assert seen[0] == old and seen[-1] == new
    assert all(s in (old, new) for s in seen), seen
    switch = seen.index(new)
    assert all(s == new for s in seen[switch:])  # once new, never old again
    assert_clean(table)


def test_a_commit_landing_during_rollback_stops_it(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = history(table, 4)
    landed = []

    def concurrent_writer() -> None:
        if not landed:
            landed.append(upsert(fresh(table), [500], 500))

    with pytest.raises(CommitConflictError, match="snapshot 5 was committed meanwhile"):
        on_io(table, concurrent_writer).rollback_to(2)
    assert state(fresh(table)) == {**states[4], 500: 500}
