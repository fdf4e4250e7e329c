"""Tags: stored as Paimon stores them, read by name, validated, and kept through expiry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakehouse_engine import (
    Catalog,
    CorruptFileError,
    InvalidIdentifierError,
    LakehouseError,
    SnapshotNotExistError,
)
from lakehouse_engine.maintenance.tags import (
    InvalidTagNameError,
    TagAlreadyExistError,
    TagNotExistError,
)
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.maintenance.helpers import (
    expected_files,
    files_on_disk,
    keyed_table,
    state,
    upsert,
)

WRITE_ONLY = {"write-only": "true"}


@pytest.fixture
def table(catalog: Catalog):
    t = keyed_table(catalog, options=WRITE_ONLY)
    for i in range(3):
        upsert(t, [i, 10], i)
    return t


def test_a_tag_is_the_snapshot_json_under_tag_slash_tag_dash_name(table) -> None:
    table.create_tag("release-1", 2)
    tag_file = Path(table.path) / "tag" / "tag-release-1"
    snapshot_file = Path(table.path_factory.snapshot_path(2))
    assert json.loads(tag_file.read_text()) == json.loads(snapshot_file.read_text())
    assert sorted(p.name for p in tag_file.parent.iterdir()) == ["tag-release-1"]  # no temp files


def test_create_tag_defaults_to_the_latest_snapshot(table) -> None:
    table.create_tag("now")
    assert table.tags()["now"].id == 3


def test_tags_lists_every_tag_by_name(table) -> None:
    table.create_tag("b", 1)
    table.create_tag("a", 3)
    tags = table.tags()
    assert list(tags) == ["a", "b"]
    assert {n: t.id for n, t in tags.items()} == {"a": 3, "b": 1}
    assert tags["b"] == table.snapshot(1)


def test_read_by_tag_with_the_read_builder_and_the_scan_option(table) -> None:
    table.create_tag("v1", 1)
    upsert(table, [10], 99)
    assert state(table, tag="v1") == {0: 0, 10: 0}
    by_option = table.copy({"scan.tag-name": "v1"})
    assert {r["id"]: r["v"] for r in read(by_option).to_pylist()} == {0: 0, 10: 0}


def test_creating_an_existing_tag_fails_and_keeps_the_old_one(table) -> None:
    table.create_tag("v1", 1)
    with pytest.raises(TagAlreadyExistError, match="tag 'v1' of table db.t already exists .it keeps snapshot 1"):
        table.create_tag("v1", 2)
    assert table.tags()["v1"].id == 1


def test_tagging_an_unknown_snapshot_fails(table) -> None:
    with pytest.raises(SnapshotNotExistError, match="snapshot 9 of table db.t doesn't exist"):
        table.create_tag("v9", 9)
    assert table.tags() == {}


def test_tagging_an_empty_table_fails(catalog: Catalog) -> None:
    empty = keyed_table(catalog, "empty")
    with pytest.raises(SnapshotNotExistError, match="no snapshot to tag"):
        empty.create_tag("v1")


def test_unknown_tags_raise_naming_the_known_ones(table) -> None:
    table.create_tag("v1", 1)
    with pytest.raises(TagNotExistError, match="tag 'v2' of table db.t doesn't exist .known tags: v1"):
        state(table, tag="v2")
    assert table.delete_tag("v2") is False  # pypaimon's contract: False, nothing deleted
    assert table.list_tags() == ["v1"]
    with pytest.raises(SnapshotNotExistError):  # TagNotExistError is a SnapshotNotExistError
        read(table.copy({"scan.tag-name": "nope"}))


@pytest.mark.parametrize("name", ["", " ", " v1", "v1 ", "a/b", "../x", "a\\b", "t\x00", "t\n", "123",
                                  "x" * 300])
def test_tag_names_that_are_not_file_names_are_rejected(table, name: str) -> None:
    with pytest.raises(InvalidTagNameError):
        table.create_tag(name)
    assert table.tags() == {}
    assert not (Path(table.path).parent / "x").exists()


def test_invalid_tag_names_are_identifier_errors(table) -> None:
    with pytest.raises(InvalidIdentifierError):
        table.delete_tag("a/b")
    with pytest.raises(LakehouseError):
        state(table, tag="../../etc")


@pytest.mark.parametrize("name", ["2026-11-21", "2026-11-21 10", "v1.0", "release_1", "v1"])
def test_names_paimon_uses_are_accepted(table, name: str) -> None:
    table.create_tag(name, 1)
    assert table.tags()[name].id == 1


def test_delete_tag_of_a_retained_snapshot_deletes_only_the_tag(table) -> None:
    table.create_tag("v1", 1)
    before = files_on_disk(table)
    table.delete_tag("v1")
    assert table.tags() == {}
    assert before - files_on_disk(table) == {str(Path(table.path) / "tag" / "tag-v1")}


def test_delete_tag_of_an_expired_snapshot_deletes_the_files_only_it_kept(table) -> None:
    table.create_tag("v1", 1)
    table.create_tag("v2", 2)
    upsert(table, [0, 1, 2, 10], 50)  # replaces every key: snapshot 1's files are not live now
    table.compact(full=True)
    table.expire_snapshots(retain_max=1)
    kept_by_tags = files_on_disk(table)
    table.delete_tag("v1")
    assert files_on_disk(table) == expected_files(table)
    assert state(table, tag="v2") == {0: 0, 1: 1, 10: 1}
    table.delete_tag("v2")
    assert files_on_disk(table) == expected_files(table)
    assert len(files_on_disk(table)) < len(kept_by_tags)


def test_a_corrupt_tag_file_is_named(table) -> None:
    tag_dir = Path(table.path_factory.tag_dir)
    tag_dir.mkdir()
    (tag_dir / "tag-bad").write_text("{not json")
    with pytest.raises(CorruptFileError, match="tag-bad"):
        table.tags()
    with pytest.raises(CorruptFileError, match="tag-bad"):
        table.expire_snapshots(retain_max=1)  # cannot tell what the tag keeps: delete nothing
    assert table.snapshot_manager().list_snapshot_ids() == [1, 2, 3]


def test_tag_files_with_paimon_retention_fields_read_as_their_snapshot(table) -> None:
    doc = json.loads(Path(table.path_factory.snapshot_path(1)).read_text())
    doc.update({"tagCreateTime": [2026, 11, 21, 10, 0, 0, 0], "tagTimeRetained": 86400.0})
    tag_dir = Path(table.path_factory.tag_dir)
    tag_dir.mkdir()
    (tag_dir / "tag-ttl").write_text(json.dumps(doc))
    assert table.tags()["ttl"] == table.snapshot(1)
    assert state(table, tag="ttl") == {0: 0, 10: 0}
