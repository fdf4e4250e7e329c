"""Changelog retention (`changelog.num-retained.*`, `changelog.time-retained`): snapshot expiry keeps
the changelog as Paimon's long-lived changelog (`changelog/changelog-<id>` with its hints), changes
read through it as through the snapshots, and changelog expiry removes it, and exactly the files
only it read, past its own retention."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog, InvalidOptionError
from lakehouse_engine.format.manifest_entries import FileKind
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.read.changes import read_changes
from lakehouse_engine.store.consumer_manager import Consumer
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.maintenance.helpers import expected_files, files_on_disk
from tests.lakehouse_engine.read.changes_helpers import changes, keyed_table, put

KEEP_CHANGELOG = {"changelog.num-retained.max": "100", "changelog.num-retained.min": "1",
                  "snapshot.num-retained.min": "1", "write-only": "true"}


def _history(t: FileStoreTable, n: int) -> None:
    """`n` commits of inserts, updates and deletes over a few keys."""
    for i in range(n):
        kind = "-D" if i % 4 == 3 else "+I"
        put(t, (i % 3, f"v{i}", kind), (10 + i, f"w{i}", "+I"))


def _change_rows(t: FileStoreTable, start: int = 0) -> list[tuple[Any, ...]]:
    rows = read_changes(t, start)
    return sorted((r["_snapshot_id"], r["_row_kind"], r["id"], r["v"]) for r in rows.to_pylist())


def _long_lived_files(t: FileStoreTable) -> set[str]:
    """What the long-lived changelogs read, found independently: their changelog/ files, their
    manifest lists still there and those lists' manifests, the files their changelog manifests
    and delta manifests add; and the changelog files of the snapshots and tags. Without a
    producer, also the written files a delta deleted that wait for its changelog's expiry (Paimon
    deletes them there): those of the long-lived changelogs' and the snapshots' deltas."""
    root = Path(t.path, "changelog")
    out = {str(p) for p in root.glob("*") if p.is_file()}
    mio = t.store.manifest_io()
    codec = t.store.partition_codec()
    delta_mode = t.options.raw.get("changelog-producer", "none") == "none"
    long_lived = [Snapshot.from_json(p.read_text(), str(p)) for p in root.glob("changelog-*")]
    live = [*t.snapshots(), *t.tags().values()]

    def path_of(e: Any) -> str:
        return f"{t.path_factory.bucket_dir(codec.from_binary(e.partition).spec, e.bucket)}/{e.file.file_name}"

    for c in long_lived + live:
        is_live = c in live
        for name in (c.base_manifest_list, c.delta_manifest_list, c.changelog_manifest_list):
            if name is None or not Path(t.path_factory.manifest_path(name)).exists():
                continue
            if is_live and name != c.changelog_manifest_list and not (delta_mode and name == c.delta_manifest_list):
                continue  # (expected_files has a snapshot's own data files)
            out.add(t.path_factory.manifest_path(name))
            for m in mio.read_manifest_list(name):
                out.add(t.path_factory.manifest_path(m.file_name))
                if name == c.base_manifest_list:
                    continue
                for e in mio.read_entries([m]):
                    read_by_changelog = e.kind == FileKind.ADD and not (is_live and name == c.delta_manifest_list)
                    waits_for_expiry = e.kind != FileKind.ADD and delta_mode and e.file.file_source != 1
                    if read_by_changelog or waits_for_expiry:
                        out.add(path_of(e))
    return out


def _assert_clean(t: FileStoreTable) -> None:
    """Every file a snapshot, tag or long-lived changelog reads is there, and nothing else is."""
    wanted = expected_files(t) | _long_lived_files(t)
    on_disk = {f for f in files_on_disk(t) if "/consumer/" not in f}
    assert wanted - on_disk == set()
    assert on_disk - wanted == set()


@pytest.mark.parametrize("producer", ["input", "lookup", "none"])
def test_expired_snapshots_become_long_lived_changelogs_that_read_the_same_changes(
        catalog: Catalog, producer: str) -> None:
    t = keyed_table(catalog, **{"changelog-producer": producer, **KEEP_CHANGELOG})
    _history(t, 8)
    if producer == "none":
        t.compact(full=True)  # the written files the deltas added are compacted away
        put(t, (99, "z", "+I"))
    before = _change_rows(t)
    snapshot_json = {p.name: p.read_text() for p in Path(t.path, "snapshot").glob("snapshot-*")}

    expired = t.expire_snapshots(retain_max=2)
    latest = t.latest_snapshot().id
    assert [s.id for s in t.snapshots()] == [latest - 1, latest]
    changelog_dir = Path(t.path, "changelog")
    assert sorted(int(p.name.split("-")[1]) for p in changelog_dir.glob("changelog-*")) == list(range(1, expired + 1))
    # The snapshot's own JSON, byte for byte, and Paimon's LATEST hint beside it.
    for p in changelog_dir.glob("changelog-*"):
        assert p.read_text() == snapshot_json["snapshot-" + p.name.split("-")[1]]
    assert (changelog_dir / "LATEST").read_text() == str(expired)
    assert _change_rows(t) == before
    _assert_clean(t)
    # Orphan removal keeps what the long-lived changelogs read.
    t.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
    assert _change_rows(t) == before


def test_a_streaming_read_reads_through_long_lived_changelogs(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", **KEEP_CHANGELOG})
    _history(t, 5)
    scan_all = t.copy({"scan.mode": "from-snapshot", "scan.snapshot-id": "1"})
    builder = scan_all.new_stream_read_builder().with_include_row_kind()
    scan, read = builder.new_streaming_scan(), builder.new_read()
    first = scan.plan()
    assert first.snapshot_id == 1
    t.expire_snapshots(retain_max=1)
    assert [s.id for s in t.snapshots()] == [5]
    got = [(first.snapshot_id, changes(read.to_arrow(first.splits())))]
    for _ in range(4):
        plan = scan.plan()
        got.append((plan.snapshot_id, changes(read.to_arrow(plan.splits()))))
    rows = read_changes(t, 0)
    expected = [(sid, sorted([(r["_row_kind"], r["id"], r["v"]) for r in rows.to_pylist()
                              if r["_snapshot_id"] == sid], key=lambda c: (c[1], c[0])))
                for sid in range(1, 6)]
    assert got == expected
    # A new reader starting below the earliest snapshot starts from the earliest changelog.
    fresh_scan = scan_all.new_stream_read_builder().new_streaming_scan()
    assert fresh_scan.plan().snapshot_id == 1


def test_incremental_between_in_changelog_mode_reads_expired_snapshots_changelogs(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", **KEEP_CHANGELOG})
    _history(t, 6)
    inc = t.copy({"incremental-between": "1,4", "incremental-between-scan-mode": "changelog"})
    rb = inc.new_read_builder()
    before = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id").to_pylist()
    t.expire_snapshots(retain_max=2)
    rb = inc.new_read_builder()
    assert rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id").to_pylist() == before
    # A diff needs both snapshots in full: still refused once the start has expired.
    diff = t.copy({"incremental-between": "1,5", "incremental-between-scan-mode": "diff"})
    with pytest.raises(InvalidOptionError, match="outside"):
        diff.new_read_builder().new_scan().plan()


@pytest.mark.parametrize("producer", ["input", "lookup", "none"])
def test_changelog_expiry_follows_its_own_retention_and_deletes_only_what_it_alone_read(
        catalog: Catalog, producer: str) -> None:
    opts = {"changelog-producer": producer, "snapshot.num-retained.min": "1",
            "snapshot.num-retained.max": "2", "changelog.num-retained.max": "5",
            "changelog.num-retained.min": "1"}
    t = keyed_table(catalog, **opts)
    _history(t, 12)  # every commit expires snapshots, then changelogs
    latest = t.latest_snapshot().id
    assert [s.id for s in t.snapshots()] == [latest - 1, latest]
    ids = sorted(int(p.name.split("-")[1]) for p in Path(t.path, "changelog").glob("changelog-*"))
    assert ids == list(range(latest - 4, latest - 1))
    assert (Path(t.path, "changelog") / "EARLIEST").read_text() == str(latest - 4)
    # The changes from the earliest changelog on still read, and give the table when replayed
    # on the rows of the snapshot before them (kept here as a tag).
    sm = t.store.snapshot_manager()
    readable = [sm.snapshot_or_changelog(i) for i in range(latest - 4, latest + 1)]
    assert all(s is not None for s in readable)
    assert {r[0] for r in _change_rows(t, latest - 5)} <= set(range(latest - 4, latest + 1))
    _assert_clean(t)


@pytest.mark.parametrize("producer", ["input", "lookup", "none"])
def test_changes_read_through_long_lived_changelogs_replay_to_the_table(catalog: Catalog, producer: str) -> None:
    opts = {"changelog-producer": producer, "snapshot.num-retained.min": "1",
            "snapshot.num-retained.max": "2", "changelog.num-retained.max": "30",
            "changelog.num-retained.min": "1"}
    t = keyed_table(catalog, **opts)
    _history(t, 3)
    t.create_tag("base", t.latest_snapshot().id)
    base = t.latest_snapshot().id
    _history(t, 6)
    assert t.store.snapshot_manager().earliest_snapshot_id() > base + 1  # read through changelogs
    state = {r["id"]: r["v"] for r in t.new_read_builder().with_tag("base").new_read().to_arrow(
        t.new_read_builder().with_tag("base").new_scan().plan().splits()).to_pylist()}
    for r in read_changes(t, base).to_pylist():  # in the order made: -U before +U
        kind, key, value = r["_row_kind"], r["id"], r["v"]
        if kind in ("+I", "+U"):
            state[key] = value
        else:
            state.pop(key, None)
    table = {r["id"]: r["v"] for r in t.new_read_builder().new_read().to_arrow(
        t.new_read_builder().new_scan().plan().splits()).to_pylist()}
    assert state == table
    _assert_clean(t)


def test_a_consumer_keeps_changelogs_from_expiry(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", **KEEP_CHANGELOG,
                                "changelog.num-retained.max": "2"})
    _history(t, 3)
    t.consumer_manager().reset_consumer("slow", Consumer(2))
    _history(t, 3)
    t.expire_snapshots(retain_max=1)
    # Snapshot expiry stops at the consumer; the changelogs of 1 stay as long-lived.
    assert t.expire_changelogs() == 0
    t.consumer_manager().reset_consumer("slow", Consumer(6))
    t.expire_snapshots(retain_max=1)
    assert t.expire_changelogs() > 0
    ids = sorted(int(p.name.split("-")[1]) for p in Path(t.path, "changelog").glob("changelog-*"))
    assert ids and ids[0] >= 5 - 1  # changelog.num-retained.max = 2 counts from latest snapshot 6
    _assert_clean(t)


def test_time_retention_keeps_young_changelogs(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", "snapshot.num-retained.min": "1",
                                "write-only": "true", "changelog.time-retained": "1 h"})
    _history(t, 4)
    t.expire_snapshots(retain_max=1, older_than=int(time.time() * 1000) + 1)
    assert [s.id for s in t.snapshots()] == [4]
    assert t.expire_changelogs() == 0  # an hour has not passed
    assert len(list(Path(t.path, "changelog").glob("changelog-*"))) == 3
    short = t.copy({"changelog.time-retained": "1 ms"})
    time.sleep(0.01)
    assert short.expire_changelogs() == 2  # the latest long-lived changelog always stays
    _assert_clean(t)


def test_without_changelog_retention_no_long_lived_changelog_is_written(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", "write-only": "true"})
    _history(t, 4)
    t.expire_snapshots(retain_max=1)
    assert not Path(t.path, "changelog").exists()
    assert t.expire_changelogs() == 0


def test_a_changelog_minimum_above_its_maximum_is_refused(catalog: Catalog) -> None:
    # As Paimon's SchemaValidation, at create and alter (each falls back to its snapshot option).
    with pytest.raises(InvalidOptionError, match="changelog.num-retained.min"):
        keyed_table(catalog, **{"changelog.num-retained.min": "5", "changelog.num-retained.max": "3"})
    with pytest.raises(InvalidOptionError, match="changelog.num-retained.min"):
        keyed_table(catalog, "t2", **{"changelog.num-retained.max": "3"})  # min: snapshot's 10
    t = keyed_table(catalog, "t3", **{"changelog.num-retained.max": "3", "changelog.num-retained.min": "1",
                                      "write-only": "true"})
    with pytest.raises(InvalidOptionError, match="changelog.num-retained.min"):
        t.copy({"changelog.num-retained.min": "4"})


def test_rollback_to_an_older_tag_removes_the_later_long_lived_changelogs(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", **KEEP_CHANGELOG})
    _history(t, 2)
    t.create_tag("two", 2)
    _history(t, 4)
    t.expire_snapshots(retain_max=1)
    assert len(list(Path(t.path, "changelog").glob("changelog-*"))) == 5
    t.rollback_to("two")
    ids = sorted(int(p.name.split("-")[1]) for p in Path(t.path, "changelog").glob("changelog-*"))
    assert ids == [1, 2]
    assert json.loads((Path(t.path, "changelog") / "LATEST").read_text()) == 2
    assert [s.id for s in t.snapshots()] == [2]
    _assert_clean(t)


def test_deleting_a_tag_of_an_expired_snapshot_keeps_what_its_long_lived_changelog_reads(
        catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", **KEEP_CHANGELOG})
    _history(t, 2)
    t.create_tag("one", 1)
    _history(t, 3)
    before = _change_rows(t)
    t.expire_snapshots(retain_max=1)
    t.delete_tag("one")
    assert _change_rows(t) == before  # changelog 1's files are still there
    _assert_clean(t)


def test_a_stream_from_a_timestamp_before_the_snapshots_starts_in_the_long_lived_changelogs(
        catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "input", **KEEP_CHANGELOG})
    times = []
    for i in range(5):
        put(t, (i, f"v{i}", "+I"))
        times.append(t.latest_snapshot().time_millis)
        time.sleep(0.005)
    t.expire_snapshots(retain_max=1)
    assert [s.id for s in t.snapshots()] == [5]
    for ts, first in ((times[1], 3), (times[0] - 1, 1)):
        scan = t.copy({"scan.mode": "from-timestamp", "scan.timestamp-millis": str(ts)}) \
            .new_stream_read_builder().new_streaming_scan()
        assert scan.plan().snapshot_id == first


@pytest.mark.parametrize("producer", ["input", "none"])
def test_a_stream_keeps_up_while_commits_expire_snapshots_into_changelogs(catalog: Catalog, producer: str) -> None:
    import threading

    t = keyed_table(catalog, **{"changelog-producer": producer, "snapshot.num-retained.min": "1",
                                "snapshot.num-retained.max": "1", "changelog.num-retained.max": "1000",
                                "changelog.num-retained.min": "1", "write-only": "true"})
    put(t, (0, "v", "+I"))
    scan_table = t.copy({"scan.mode": "from-snapshot", "scan.snapshot-id": "1"})
    builder = scan_table.new_stream_read_builder().with_include_row_kind()
    scan, read = builder.new_streaming_scan(), builder.new_read()
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(1, 25):
                put(t, (i % 5, f"v{i}", "-D" if i % 7 == 0 else "+I"))
                t.expire_snapshots()  # every commit: only the latest snapshot stays
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    streamed: list[dict[str, Any]] = []
    while True:
        finished = done.is_set()
        plan = scan.plan()
        if plan.snapshot is not None:
            streamed += read.to_arrow(plan.splits()).to_pylist()
            time.sleep(0.02)  # a slow reader: the snapshots it reads have expired by then
        elif finished and scan.checkpoint() > t.latest_snapshot().id:
            break
    thread.join()
    assert not errors
    assert len(list(Path(t.path, "changelog").glob("changelog-*"))) > 10
    state: dict[int, Any] = {}
    for r in streamed:
        if r["_row_kind"] in ("+I", "+U"):
            state[r["id"]] = r["v"]
        else:
            state.pop(r["id"], None)
    rb = t.new_read_builder()
    assert state == {r["id"]: r["v"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()}
