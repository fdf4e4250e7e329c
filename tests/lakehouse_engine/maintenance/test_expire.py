"""Snapshot expiry: which snapshots go (Paimon's rules), and that exactly the files nothing else
references go with them."""

from __future__ import annotations

import dataclasses
import shutil
import time
import uuid
from pathlib import Path

import pytest

from lakehouse_engine import Catalog, InvalidOptionError, SnapshotNotExistError
from lakehouse_engine.format.manifest import encode_index_manifest_entries
from lakehouse_engine.format.manifest_entries import FileKind, IndexManifestEntry
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.maintenance import expire as expire_module
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read, write
from tests.lakehouse_engine.maintenance.helpers import (
    batch,
    expected_files,
    files_on_disk,
    fresh,
    keyed_table,
    missing_files,
    now_ms,
    on_io,
    state,
    upsert,
)
from tests.support.io_faults import FaultInjectingFileIO


def commits(table: FileStoreTable, n: int, start: int = 0) -> dict[int, dict[int, int]]:
    """`n` commits, each upserting a few keys; returns {snapshot id: state it holds}."""
    states = {}
    for i in range(start, start + n):
        upsert(table, [i, i + 1, 100 + i % 3], i)
        sid = table.latest_snapshot().id
        states[sid] = state(table, sid)
    return states


WRITE_ONLY = {"write-only": "true"}  # one snapshot per commit: no compaction, no expiry after commit
NO_COMPACTION = {"num-sorted-run.compaction-trigger": "50"}


def assert_clean(table: FileStoreTable) -> None:
    """Every referenced file is there and every file there is referenced."""
    assert missing_files(table) == set()
    assert files_on_disk(table) == expected_files(table)


def test_retain_max_expires_the_oldest_whatever_their_age(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = commits(table, 8)
    assert table.expire_snapshots(retain_max=3) == 5
    assert table.snapshot_manager().list_snapshot_ids() == [6, 7, 8]
    assert (Path(table.path) / "snapshot" / "EARLIEST").read_text() == "6"
    assert table.snapshot_manager().earliest_snapshot_id() == 6
    for sid in (6, 7, 8):
        assert state(table, sid) == states[sid]
    assert_clean(table)


def test_reading_an_expired_snapshot_raises_snapshot_not_exist(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 4)
    table.expire_snapshots(retain_max=1)
    with pytest.raises(SnapshotNotExistError, match="snapshot 2 of table db.t does not exist .earliest retained is 4"):
        read(table, 2)


def test_retain_min_keeps_snapshots_however_old(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 7)
    assert table.expire_snapshots(retain_min=5, older_than=now_ms()) == 2
    assert table.snapshot_manager().list_snapshot_ids() == [3, 4, 5, 6, 7]
    assert table.expire_snapshots(retain_min=5, older_than=now_ms()) == 0


def test_only_snapshots_committed_before_the_cutoff_expire(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 3)
    time.sleep(0.02)
    cutoff = int(time.time() * 1000)
    commits(table, 3, start=3)
    assert table.expire_snapshots(retain_min=1, older_than=cutoff) == 3
    assert table.snapshot_manager().list_snapshot_ids() == [4, 5, 6]


def test_expiry_stops_at_the_first_snapshot_young_enough_to_keep(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 5)
    # Pretend snapshot 2 is from the future: 3 and 4 are old, but expiry never skips over 2.
    path = Path(table.path_factory.snapshot_path(2))
    s = Snapshot.from_json(path.read_text(), str(path))
    path.write_text(dataclasses.replace(s, time_millis=s.time_millis + 3_600_000).to_json())
    assert table.expire_snapshots(retain_min=1, older_than=now_ms()) == 1
    assert table.snapshot_manager().list_snapshot_ids() == [2, 3, 4, 5]


def test_max_deletes_bounds_one_run(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 10)
    assert table.expire_snapshots(retain_min=1, older_than=now_ms(), max_deletes=3) == 3
    assert table.snapshot_manager().earliest_snapshot_id() == 4
    assert table.expire_snapshots(retain_min=1, older_than=now_ms(), max_deletes=3) == 3
    assert table.snapshot_manager().list_snapshot_ids() == [7, 8, 9, 10]
    assert_clean(table)


def test_expiry_after_commit_follows_the_options(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={**NO_COMPACTION, "snapshot.num-retained.min": "2",
                                          "snapshot.num-retained.max": "3"})
    states = commits(table, 9)
    assert table.snapshot_manager().list_snapshot_ids() == [7, 8, 9]
    assert state(table) == states[9]
    assert_clean(table)


def test_expiry_after_commit_keeps_young_snapshots_beyond_the_minimum(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={**NO_COMPACTION, "snapshot.num-retained.min": "1"})
    commits(table, 5)
    assert table.snapshot_manager().list_snapshot_ids() == [1, 2, 3, 4, 5]


def test_expiry_after_commit_expires_old_snapshots_past_time_retained(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={**NO_COMPACTION, "snapshot.num-retained.min": "2",
                                          "snapshot.time-retained": "1 ms"})
    commits(table, 5)
    assert table.snapshot_manager().list_snapshot_ids() == [4, 5]


def test_expire_limit_option_bounds_expiry_after_commit(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 6)
    writable = table.copy({**NO_COMPACTION, "write-only": "false", "snapshot.num-retained.min": "1",
                           "snapshot.num-retained.max": "1", "snapshot.expire.limit": "2"})
    upsert(writable, [1], 1)  # snapshot 7, then expiry of at most 2: 1 and 2
    assert writable.snapshot_manager().list_snapshot_ids() == [3, 4, 5, 6, 7]


def test_write_only_tables_do_not_expire_after_commit(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={"write-only": "true", "snapshot.num-retained.min": "1",
                                          "snapshot.num-retained.max": "1"})
    commits(table, 4)
    assert table.snapshot_manager().list_snapshot_ids() == [1, 2, 3, 4]


@pytest.mark.parametrize("kwargs, message", [
    ({"retain_min": 0}, "retain_min .* is 0, it must be at least 1"),
    ({"retain_max": 0}, "must be at least 1"),
    ({"retain_min": 5, "retain_max": 2}, "retain_min \\(5\\) is above retain_max \\(2\\)"),
    ({"max_deletes": 0}, "max_deletes"),
])
def test_invalid_bounds_are_rejected_before_anything_goes(catalog: Catalog, kwargs: dict, message: str) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 3)
    with pytest.raises(InvalidOptionError, match=message):
        table.expire_snapshots(**kwargs)
    assert table.snapshot_manager().list_snapshot_ids() == [1, 2, 3]


def test_options_that_contradict_each_other_do_not_fail_commits(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={**NO_COMPACTION, "snapshot.num-retained.min": "5",
                                          "snapshot.num-retained.max": "2"})
    commits(table, 6)  # expiry after commit keeps max(min, max) = 5 and never raises
    assert table.snapshot_manager().list_snapshot_ids() == [2, 3, 4, 5, 6]


def test_files_a_compaction_replaced_live_until_no_snapshot_needs_them(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = commits(table, 4)
    before_compaction = table.latest_snapshot().id
    table.compact(full=True)
    states.update(commits(table, 2, start=10))
    # The pre-compaction snapshot stays readable while it is retained: its files are still there.
    latest = table.latest_snapshot().id
    table.expire_snapshots(retain_max=latest - before_compaction + 1)
    assert table.snapshot_manager().earliest_snapshot_id() == before_compaction
    assert state(table, before_compaction) == states[before_compaction]
    assert_clean(table)
    old_files = {e.file.file_name for e in table.store.manifest_io().live_entries(table.snapshot(before_compaction))}
    table.expire_snapshots(retain_max=1)
    assert state(table) == states[latest]
    assert not old_files & {Path(p).name for p in files_on_disk(table)}
    assert_clean(table)


def test_every_step_of_a_long_history_deletes_exactly_the_unreferenced_files(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={"write-only": "true", "num-sorted-run.compaction-trigger": "2"})
    states: dict[int, dict[int, int]] = {}
    for i in range(12):
        if i == 5:
            write(table, batch([1, 2, 3], 50), overwrite={"dt": "2026-11-02"})
        elif i % 4 == 3:
            table.compact(full=i % 8 == 7)
        else:
            upsert(table, range(i, i + 6), i)
        sid = table.latest_snapshot().id
        states[sid] = state(table, sid)
    latest = table.latest_snapshot().id
    for keep in range(latest - 1, 0, -2):
        table.expire_snapshots(retain_max=keep)
        ids = table.snapshot_manager().list_snapshot_ids()
        assert ids == list(range(latest - keep + 1, latest + 1))
        for sid in ids:
            assert state(table, sid) == states[sid]
        assert_clean(table)


def test_tagged_snapshots_keep_their_files_through_expiry(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = commits(table, 3)
    table.create_tag("before-overwrite", 2)
    write(table, batch([1, 2, 3, 4], 9), overwrite={})
    table.compact(full=True)
    commits(table, 2, start=20)
    table.expire_snapshots(retain_max=1)
    assert table.snapshot_manager().list_snapshot_ids() == [table.latest_snapshot().id]
    assert state(table, tag="before-overwrite") == states[2]
    assert_clean(table)
    table.delete_tag("before-overwrite")  # its snapshot expired: the files only it kept go
    assert_clean(table)


def test_a_tag_created_while_expiry_runs_keeps_its_files(catalog: Catalog, monkeypatch) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = commits(table, 5)
    original = expire_module.plan_expiry

    def plan_then_tag(*args, **kwargs):
        plan = original(*args, **kwargs)
        # A concurrent create_tag writes its tag after the plan, before snapshot 2 is deleted.
        Path(table.path_factory.tag_dir).mkdir(exist_ok=True)
        Path(table.path_factory.tag_dir, "tag-late").write_text(table.snapshot(2).to_json())
        return plan

    monkeypatch.setattr(expire_module, "plan_expiry", plan_then_tag)
    table.expire_snapshots(retain_max=1)
    assert state(table, tag="late") == states[2]
    assert_clean(table)


def test_an_unreadable_expiring_snapshot_leaves_orphans_not_errors(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    states = commits(table, 4)
    Path(table.path_factory.manifest_path(table.snapshot(1).base_manifest_list)).unlink()
    from lakehouse_engine.store.manifest_io import clear_manifest_cache

    clear_manifest_cache()
    assert table.expire_snapshots(retain_max=2) == 2
    assert state(table) == states[4]
    assert missing_files(table) == set()
    table.remove_orphan_files(older_than=now_ms())
    assert_clean(table)


def test_a_failing_expiry_after_commit_does_not_fail_the_commit(catalog: Catalog, tmp_path: Path) -> None:
    table = keyed_table(catalog, options={**NO_COMPACTION, "snapshot.num-retained.min": "1",
                                          "snapshot.num-retained.max": "1"})
    commits(table, 2)
    copy = str(tmp_path / "copy")
    shutil.copytree(table.path, copy)
    counting = FaultInjectingFileIO.local()
    upsert(FileStoreTable(counting, table.name, table.path, table.schema), [7], 7)
    first_delete = next(i for i, (kind, _) in enumerate(counting.operations, 1) if kind == "delete")
    failing = FaultInjectingFileIO.local(fail_at=first_delete, crash=False)
    t = FileStoreTable(failing, table.name, copy, table.schema)
    assert upsert(t, [7], 7) == [3]
    assert failing.fault is not None and failing.fault[0] == "delete"
    assert state(t)[7] == 7


def _write_index_manifest(table: FileStoreTable, index_files: list[str]) -> str:
    entries = []
    for name in index_files:
        path = Path(table.path_factory.index_dir, name)
        path.parent.mkdir(exist_ok=True)
        if not path.exists():
            path.write_bytes(b"\x00\x00\x00\x01")
        entries.append(IndexManifestEntry(FileKind.ADD, table.store.partition_codec().from_values(("2026-11-01",)).binary,
                                          0, "HASH", name, 4, 1))
    name = f"index-manifest-{uuid.uuid4()}-0"
    Path(table.path_factory.manifest_path(name)).write_bytes(encode_index_manifest_entries(entries))
    return name


def _set_index_manifest(table: FileStoreTable, name: str) -> None:
    """Give the latest snapshot an index manifest (later commits carry it forward)."""
    latest = table.latest_snapshot()
    path = Path(table.path_factory.snapshot_path(latest.id))
    path.write_text(dataclasses.replace(latest, index_manifest=name).to_json())


def test_index_manifests_and_index_files_go_when_no_snapshot_names_them(catalog: Catalog) -> None:
    table = keyed_table(catalog, options=WRITE_ONLY)
    commits(table, 2)
    first = _write_index_manifest(table, ["index-a-0", "index-shared-0"])
    _set_index_manifest(table, first)
    commits(table, 2, start=2)
    second = _write_index_manifest(table, ["index-b-0", "index-shared-0"])
    _set_index_manifest(table, second)
    commits(table, 2, start=4)
    assert table.latest_snapshot().index_manifest == second
    assert_clean(table)
    table.expire_snapshots(retain_max=3)  # snapshots 1..3 go; 4 (the second manifest) stays
    index_dir = Path(table.path_factory.index_dir)
    assert sorted(p.name for p in index_dir.iterdir()) == ["index-b-0", "index-shared-0"]
    assert not Path(table.path_factory.manifest_path(first)).exists()
    assert_clean(table)


def test_every_snapshot_present_stays_readable_at_every_step_of_expiry(catalog: Catalog) -> None:
    table = keyed_table(catalog, options={**WRITE_ONLY, "num-sorted-run.compaction-trigger": "2"})
    states = commits(table, 4)
    table.compact(full=True)
    states[table.latest_snapshot().id] = state(table)
    states.update(commits(table, 3, start=4))
    latest = table.latest_snapshot().id
    table.create_tag("t3", 3)
    steps = []

    def reader() -> None:
        t = fresh(table)
        present = t.snapshot_manager().list_snapshot_ids()
        assert present[-1] == latest
        for sid in present:
            assert state(t, sid) == states[sid]  # never a missing file
        assert state(t, tag="t3") == states[3]
        steps.append(len(present))

    on_io(table, reader).expire_snapshots(retain_max=2)
    reader()
    assert steps[0] == latest and steps[-1] == 2 and len(steps) > latest
