"""Orphan files: unreferenced data, manifest, index and temporary files older than the cutoff go;
metadata files and files we do not recognise never do."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from lakehouse_engine import Catalog, CorruptFileError
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from tests.lakehouse_engine.maintenance.helpers import (
    batch,
    expected_files,
    files_on_disk,
    keyed_table,
    now_ms,
    state,
    upsert,
)

WRITE_ONLY = {"write-only": "true"}


@pytest.fixture
def table(catalog: Catalog):
    t = keyed_table(catalog, options=WRITE_ONLY)
    for i in range(3):
        upsert(t, [i, 10, 11], i)
    return t


def abandoned_write(table) -> set[str]:
    """Data files of a write that was prepared and never committed."""
    before = files_on_disk(table)
    w = table.new_batch_write_builder().new_write()
    w.write_arrow(batch([20, 21, 22], 5))
    w.prepare_commit()
    return files_on_disk(table) - before


def age(path: str, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_files_of_an_uncommitted_write_are_removed(table) -> None:
    orphans = abandoned_write(table)
    assert orphans
    removed = table.remove_orphan_files(older_than=now_ms())
    assert set(removed) == orphans and removed == sorted(removed)
    assert files_on_disk(table) == expected_files(table)
    assert state(table) == {0: 0, 1: 1, 2: 2, 10: 2, 11: 2}


def test_recent_files_are_kept_by_the_default_one_day_cutoff(table) -> None:
    orphans = abandoned_write(table)
    assert table.remove_orphan_files() == []
    old = sorted(orphans)[0]
    age(old, 2 * 86_400)
    assert table.remove_orphan_files() == [old]


def test_dry_run_lists_and_deletes_nothing(table) -> None:
    orphans = abandoned_write(table)
    before = files_on_disk(table)
    assert set(table.remove_orphan_files(older_than=now_ms(), dry_run=True)) == orphans
    assert files_on_disk(table) == before


def test_unreferenced_manifests_and_index_files_and_temp_files_go(table) -> None:
    root = Path(table.path)
    hex_id, dashed = uuid.uuid4().hex, str(uuid.uuid4())
    junk = [root / "manifest" / f"manifest-{dashed}-7", root / "manifest" / f"manifest-list-{dashed}-8",
            root / "manifest" / f"index-manifest-{dashed}-0", root / "index" / f"index-{dashed}-0",
            root / "snapshot" / f".snapshot-4.{hex_id}.tmp", root / "snapshot" / f"LATEST.{hex_id}.tmp",
            root / "schema" / f".schema-1.{dashed}.tmp", root / "dt=2026-11-01" / "bucket-9" / "data-x.parquet"]
    for p in junk:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"junk")
    assert sorted(table.remove_orphan_files(older_than=now_ms())) == sorted(map(str, junk))
    assert files_on_disk(table) == expected_files(table)


def test_metadata_and_unknown_files_are_never_removed(table) -> None:
    root = Path(table.path)
    keep = [root / "snapshot" / "EARLIEST", root / "schema" / "schema-7",
            root / "tag" / "tag-x", root / "README.md", root / "manifest" / "notes.txt",
            root / "statistics" / "stats-1", root / "dt=2026-11-01" / "_SUCCESS"]
    for p in keep:
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists():
            p.write_bytes(b"{}" if p.parent.name == "tag" else b"x")
    (root / "tag" / "tag-x").write_text(table.snapshot(1).to_json())
    before = files_on_disk(table)
    assert table.remove_orphan_files(older_than=now_ms()) == []
    assert files_on_disk(table) == before


def test_files_kept_by_tags_or_old_snapshots_stay(table) -> None:
    table.create_tag("v1", 1)
    upsert(table, [0, 1, 2, 10, 11], 9)
    table.compact(full=True)
    table.expire_snapshots(retain_max=2)
    before = files_on_disk(table)
    assert table.remove_orphan_files(older_than=now_ms()) == []
    assert files_on_disk(table) == before
    assert state(table, tag="v1") == {0: 0, 10: 0, 11: 0}


def test_a_corrupt_manifest_list_stops_it_before_anything_is_deleted(table) -> None:
    abandoned_write(table)
    Path(table.path_factory.manifest_path(table.snapshot(2).delta_manifest_list)).write_bytes(b"garbage")
    clear_manifest_cache()
    before = files_on_disk(table)
    with pytest.raises(CorruptFileError, match=table.snapshot(2).delta_manifest_list):
        table.remove_orphan_files(older_than=now_ms())
    assert files_on_disk(table) == before


def test_a_corrupt_snapshot_stops_it_naming_the_file(table) -> None:
    abandoned_write(table)
    Path(table.path_factory.snapshot_path(1)).write_text("{trunc")
    before = files_on_disk(table)
    with pytest.raises(CorruptFileError, match="snapshot-1"):
        table.remove_orphan_files(older_than=now_ms())
    assert files_on_disk(table) == before
