"""A committer that fell behind while an expiry ran must never publish into an id expiry freed.

Put-if-absent alone does not stop it: after expiry deleted snapshots N-1 and N, a committer whose
base was N-1 finds snapshot-N absent and would "win" it, outside the table's chain, and be told
its commit landed. These tests open that window on purpose.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.io import FileIO
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.write.commit_planners import AppendPlanner
from lakehouse_engine.write.file_store_commit import FileStoreCommit
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _batch(first: int, n: int = 3) -> pa.Table:
    return pa.table({"id": list(range(first, first + n)), "v": [first] * n}, schema=SCHEMA)


def _others_commit(table: Any) -> None:
    """Seven commits by others."""
    for i in range(7):
        write(table, _batch(100 + 10 * i))
    time.sleep(0.01)


def _expire(table: Any) -> None:
    """An expiry that keeps only the last two snapshots."""
    table.expire_snapshots(retain_max=2, retain_min=1, older_than=int(time.time() * 1000))


def _commit_with(table: Any, expire_at: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Commit rows 1..3 while others commit 7 snapshots as it writes its manifests, and an expiry
    runs then too (`expire_at` = "manifests"), before it reads its base snapshot's manifests at all
    ("planning": the base's manifest lists are gone when it reads them) or as it puts its snapshot
    ("publish": after the committer checked that its base snapshot is still there)."""
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_batch(1))
    messages = w.prepare_commit()
    real_index: Callable[..., Any] = FileStoreCommit._index_manifest
    real_put: Callable[..., Any] = FileIO.try_put_if_absent
    real_plan: Callable[..., Any] = AppendPlanner.plan
    fired: set[str] = set()

    def plan_hook(self: Any, latest: Any) -> Any:
        if expire_at == "planning" and "planning" not in fired:
            fired.add("planning")
            _others_commit(table)
            fired.add("overtaken")
            _expire(table)
            clear_manifest_cache()  # as in another process: nothing of the base was read yet
        return real_plan(self, latest)

    def index_hook(self: Any, *args: Any) -> Any:
        if expire_at != "planning" and "manifests" not in fired:
            fired.add("manifests")
            _others_commit(table)
            fired.add("overtaken")
            if expire_at == "manifests":
                _expire(table)
        return real_index(self, *args)

    def put_hook(self: Any, path: str, data: bytes) -> Any:
        if expire_at == "publish" and "overtaken" in fired and "publish" not in fired \
                and path.rsplit("/", 1)[-1].startswith("snapshot-"):
            fired.add("publish")
            _expire(table)
        return real_put(self, path, data)

    monkeypatch.setattr(FileStoreCommit, "_index_manifest", index_hook)
    monkeypatch.setattr(FileIO, "try_put_if_absent", put_hook)
    monkeypatch.setattr(AppendPlanner, "plan", plan_hook)
    ids = c.commit(messages)
    monkeypatch.setattr(AppendPlanner, "plan", real_plan)
    monkeypatch.setattr(FileStoreCommit, "_index_manifest", real_index)
    monkeypatch.setattr(FileIO, "try_put_if_absent", real_put)
    assert expire_at in fired
    return ids


@pytest.mark.parametrize("where", ["manifests", "planning", "publish"])
def test_a_committer_overtaken_by_commits_and_expiry_lands_on_the_real_chain(
        catalog: Catalog, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "snapshot.num-retained.min": "1"})
    write(table, _batch(50))  # snapshot 1: our base
    ids = _commit_with(table, where, monkeypatch)
    latest = table.snapshot_manager().latest_snapshot_id()
    assert ids == [latest]  # acknowledged as the newest snapshot, not as a freed id below it
    got = sorted(read(table).column("id").to_pylist())
    assert got == sorted([1, 2, 3, 50, 51, 52] + [100 + 10 * i + j for i in range(7) for j in range(3)])
    ids_on_disk = table.snapshot_manager().list_snapshot_ids()
    assert ids_on_disk == list(range(ids_on_disk[0], ids_on_disk[-1] + 1))


def test_a_successor_expired_between_listing_and_reading_does_not_hide_a_reused_id(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The expiry that freed snapshot-2 is still sweeping: snapshot-3 is in the listing but gone
    when read. The check must look further up the chain (snapshot-4, committed before the put
    began), not take the vanished snapshot as "nothing above": that acknowledged a commit outside
    the chain and lost its rows (seen once in the 8-writer concurrency test under load)."""
    from lakehouse_engine.store.snapshot_manager import SnapshotManager

    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    for i in range(5):
        write(table, _batch(10 * i))
    snapshots = table.snapshot_manager()
    listed = snapshots.list_snapshot_ids()
    assert listed[:5] == [1, 2, 3, 4, 5]
    third = snapshots.snapshot(3)
    for sid in (1, 3):  # 1: the zombie's expired base; 3: swept after the listing below was taken
        table.file_io.delete_file(table.path_factory.snapshot_path(sid), quiet=False)
    monkeypatch.setattr(SnapshotManager, "list_snapshot_ids", lambda self: [i for i in listed if i != 1])
    put_millis = int(time.time() * 1000) + 1
    assert snapshots.reused_expired_id(2, put_millis)
    # Its direct successor committed after the put (it read the new snapshot): the id was the next one.
    table.file_io.write_bytes(table.path_factory.snapshot_path(3), third.to_json().encode())
    assert not snapshots.reused_expired_id(2, 0)
    assert snapshots.reused_expired_id(2, third.time_millis + 1)


def _overtake_first_index_read(table: Any, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """On the first index read of a snapshot (the first read of its metadata), others commit 7
    snapshots and an expiry deletes that snapshot's metadata, as from another process."""
    from lakehouse_engine.store.manifest_io import ManifestIO

    real: Callable[..., Any] = ManifestIO.index_entries
    fired: set[str] = set()

    def hook(self: Any, snapshot: Any) -> Any:
        if not fired and snapshot is not None:
            fired.add("overtaken")
            _others_commit(table)
            _expire(table)
            clear_manifest_cache()
        return real(self, snapshot)

    monkeypatch.setattr(ManifestIO, "index_entries", hook)
    return fired


@pytest.mark.parametrize("who", ["writer", "compaction"])
def test_a_writer_or_compaction_whose_base_snapshot_expires_as_it_reads_it_reads_the_new_latest(
        catalog: Catalog, who: str, monkeypatch: pytest.MonkeyPatch) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "snapshot.num-retained.min": "1", "write-only": "true"})
    write(table, _batch(50))
    write(table, _batch(60))
    fired = _overtake_first_index_read(table, monkeypatch)
    if who == "writer":
        write(table, _batch(1))
    else:
        assert table.compact(full=True)
    assert fired
    expected = [1, 2, 3] if who == "writer" else []
    expected += [50, 51, 52, 60, 61, 62] + [100 + 10 * i + j for i in range(7) for j in range(3)]
    assert sorted(read(table).column("id").to_pylist()) == sorted(expected)


def test_a_put_behind_an_expiry_still_sweeping_is_outside_the_chain_even_when_the_chain_moved_on_since(
        catalog: Catalog) -> None:
    """Expiry listed snapshots 1-5, deleted 1-3; a stale committer put its snapshot at the freed
    id 3; the expiry then deleted 4 and 5; snapshot 6 was committed after the put began. The
    lowest snapshot above ours (6) is younger than the put, yet ours is outside the chain: a
    successor of ours would have outlived the gap (seen as a lost write of 5 rows, once in about
    40 runs of the 8-writer concurrency test)."""
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    for i in range(7):
        write(table, _batch(10 * i))
    snapshots = table.snapshot_manager()
    zombie = snapshots.snapshot(3)
    for sid in (1, 2, 3, 4, 5):
        table.file_io.delete_file(table.path_factory.snapshot_path(sid), quiet=False)
    table.file_io.write_bytes(table.path_factory.snapshot_path(3), zombie.to_json().encode())
    put_millis = snapshots.snapshot(6).time_millis - 1
    assert snapshots.reused_expired_id(3, put_millis)
    # The same gap with our snapshot expired too is what a legitimate successor chain looks like.
    table.file_io.delete_file(table.path_factory.snapshot_path(3), quiet=False)
    assert not snapshots.reused_expired_id(3, put_millis)


def test_a_committer_whose_base_expired_while_it_planned_never_puts_even_when_the_put_check_cannot_tell(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a put at a freed id the chain may already have moved past every trace of it (the
    expiry deleted the stale snapshot too): the check after the put cannot tell, so it must never
    be needed. Modelled by a check that always says "the next id": the commit still lands on the
    real chain, because it saw its base gone before putting."""
    from lakehouse_engine.store.snapshot_manager import SnapshotManager

    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "snapshot.num-retained.min": "1"})
    write(table, _batch(50))
    monkeypatch.setattr(SnapshotManager, "reused_expired_id", lambda self, sid, put_millis: False)
    ids = _commit_with(table, "manifests", monkeypatch)
    assert ids == [table.snapshot_manager().latest_snapshot_id()]
    got = sorted(read(table).column("id").to_pylist())
    assert got == sorted([1, 2, 3, 50, 51, 52] + [100 + 10 * i + j for i in range(7) for j in range(3)])
