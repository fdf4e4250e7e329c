"""Exactly-once commits: a commit retried after a fault at any of its file operations, by the same
committer, a new committer of the same commit user, or one of a new commit user, applies its batch
once; an error after the data landed says so (PostCommitError with the snapshot id); a full disk
while publishing the snapshot is a clear StorageError, not a lost race."""

from __future__ import annotations

import errno
import logging
import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from bench.reliability.retry_cases import (
    RETRIES,
    TABLE_KINDS,
    batch,
    contents,
    count_operations,
    error_is_clear,
    make_template,
    modes_of,
    run_case,
)
from lakehouse_engine import Catalog, LakehouseError
from lakehouse_engine.errors import CommitTimeoutError, PostCommitError, StorageError
from lakehouse_engine.io import FileIO
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.table_commit import TableCommit
from tests.lakehouse_engine.maintenance.helpers import (
    expected_files,
    files_on_disk,
    missing_files,
    now_ms,
)


@pytest.mark.parametrize("retry", RETRIES)
@pytest.mark.parametrize("kind", list(TABLE_KINDS))
def test_a_commit_retried_after_a_fault_at_any_operation_applies_once(catalog: Catalog, tmp_path: Path,
                                                                      kind: str, retry: str) -> None:
    template = make_template(catalog, kind)
    operations = count_operations(template, tmp_path)
    assert len(operations) > 5
    landed_then_failed = 0
    for k, (op, path) in enumerate(operations, 1):
        modes = modes_of(op)
        # Snapshot puts fail every way; other operations one way each, taking turns (the
        # campaign in bench/reliability runs every way everywhere).
        for mode in modes if op == "put-if-absent" else (modes[k % len(modes)],):
            result = run_case(template, tmp_path, k, mode, retry)
            where = f"fault {mode} at operation {k} ({op} {path}): first error {result.error!r}"
            assert error_is_clear(result), where
            assert not result.claimed_nothing_committed, where
            assert result.got == template.after, where + ": the batch was not applied exactly once"
            assert result.retry_landed_at is not None and result.retry_ids[:1] == [result.retry_landed_at], where
            if result.landed_at is not None:
                assert result.retry_landed_at == result.landed_at, where + ": the retry committed again"
            assert result.missing_files == set(), where
            assert result.orphans_left == set() and result.gone_files == set(), where
            landed_then_failed += result.error is not None and result.landed_at is not None
    if kind == "aggregation":  # its commits compact after the data: a failure there comes after
        assert landed_then_failed > 0


def _fresh_write(table: FileStoreTable, ids: list[int], v: int) -> tuple[str, list]:
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(batch(ids, v))
    messages = w.prepare_commit()
    w.close()
    return wb.commit_user, messages


def test_a_batch_commit_that_succeeded_still_refuses_a_second_commit(catalog: Catalog) -> None:
    template = make_template(catalog, "append")
    commit = TableCommit(template.table.store, template.commit_user)
    ids = commit.commit(pickle.loads(template.messages))
    with pytest.raises(LakehouseError, match="already used"):
        commit.commit(pickle.loads(template.messages))
    # A new committer (another process) retrying the same messages is a no-op returning the snapshot.
    again = template.table.new_batch_write_builder().new_commit().commit(pickle.loads(template.messages))
    assert again == ids
    assert contents(template.table) == template.after


def test_a_retry_with_other_messages_is_refused(catalog: Catalog) -> None:
    template = make_template(catalog, "append")
    table = template.table
    io = table.file_io
    table.store.file_io = _failing_put(io, errno.ENOSPC)
    commit = TableCommit(table.store, template.commit_user)
    with pytest.raises(StorageError):
        commit.commit(pickle.loads(template.messages))
    table.store.file_io = io
    _, other = _fresh_write(table, [50], 1)
    with pytest.raises(LakehouseError, match="tried before with other messages"):
        commit.commit(other)
    assert contents(table) == template.before


class _FullDiskOnSnapshots(FileIO):
    """A FileIO whose put-if-absent (snapshot files) fails with an OS error after or before landing."""

    def __init__(self, inner: FileIO, err: int, land: bool):
        super().__init__(inner.fs)
        self.err, self.land, self.puts = err, land, 0

    def try_put_if_absent(self, path: str, data: bytes) -> bool:
        self.puts += 1
        if self.land:
            super().try_put_if_absent(path, data)
        raise OSError(self.err, "No space left on device", path)


def _failing_put(io: FileIO, err: int, land: bool = False) -> _FullDiskOnSnapshots:
    return _FullDiskOnSnapshots(io, err, land)


def test_a_full_disk_while_publishing_the_snapshot_is_a_storage_error_not_a_lost_race(
        catalog: Catalog) -> None:
    template = make_template(catalog, "append")
    table = template.table
    files_before = files_on_disk(table)
    plain = table.file_io
    table.store.file_io = failing = _failing_put(plain, errno.ENOSPC)
    commit = TableCommit(table.store, template.commit_user)
    with pytest.raises(StorageError, match="snapshot-4") as err:
        commit.commit(pickle.loads(template.messages))
    assert not isinstance(err.value, CommitTimeoutError)
    assert err.value.errno == errno.ENOSPC and table.name in str(err.value)
    assert "nothing was committed" in str(err.value)
    assert failing.puts == 1  # not retried as if another committer had taken the id
    table.store.file_io = plain
    assert contents(table) == template.before
    # The attempt's manifests were removed again; only the batch's data files are new.
    new = files_on_disk(table) - files_before
    assert new == set() or all("/bucket-" in p for p in new)
    assert commit.commit(pickle.loads(template.messages)) != []
    assert contents(table) == template.after


def test_a_full_disk_after_the_snapshot_landed_returns_it(catalog: Catalog,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    template = make_template(catalog, "append")
    table = template.table
    plain = table.file_io
    table.store.file_io = _failing_put(plain, errno.ENOSPC, land=True)
    with caplog.at_level(logging.WARNING):
        ids = TableCommit(table.store, template.commit_user).commit(pickle.loads(template.messages))
    table.store.file_io = plain
    assert ids == [4] and table.snapshot(4).commit_user == template.commit_user
    assert contents(table) == template.after


class _FullDiskAfterFirstSnapshot(FileIO):
    """Every write fails with ENOSPC once one snapshot file has been published."""

    def __init__(self, inner: FileIO):
        super().__init__(inner.fs)
        self.full = False

    def _check(self, path: str) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device", path)

    def try_put_if_absent(self, path: str, data: bytes) -> bool:
        self._check(path)
        landed = super().try_put_if_absent(path, data)
        self.full = True
        return landed

    def write_bytes(self, path: str, data: bytes) -> None:
        self._check(path)
        super().write_bytes(path, data)

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        self._check(path)
        super().overwrite_atomic(path, data)

    def open_output(self, path: str) -> pa.NativeFile:
        self._check(path)
        return super().open_output(path)


def test_a_full_disk_after_the_data_landed_raises_post_commit_error_with_its_snapshot(
        catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    template = make_template(catalog, "aggregation")  # its commit compacts after the data
    table = template.table
    plain = table.file_io
    table.store.file_io = _FullDiskAfterFirstSnapshot(plain)
    commit = TableCommit(table.store, template.commit_user)
    with caplog.at_level(logging.WARNING), pytest.raises(PostCommitError) as err:
        commit.commit(pickle.loads(template.messages))
    landed = table.snapshot_manager().latest_snapshot_id()
    assert err.value.snapshot_ids == [landed] and table.snapshot(landed).commit_kind == "APPEND"
    assert "is committed" in str(err.value) and "nothing was committed" not in str(err.value)
    assert isinstance(err.value.__cause__, OSError) and err.value.__cause__.errno == errno.ENOSPC
    assert "LATEST hint failed" in caplog.text
    assert pickle.loads(pickle.dumps(err.value)).snapshot_ids == [landed]
    table.store.file_io = plain
    assert contents(table) == template.after
    with pytest.raises(LakehouseError, match="cannot abort messages whose data this committer committed"):
        commit.abort(pickle.loads(template.messages))
    ids = commit.commit(pickle.loads(template.messages))  # finishes the compaction only
    assert ids[0] == landed and len(ids) == 2 and table.snapshot(ids[1]).commit_kind == "COMPACT"
    assert contents(table) == template.after
    assert missing_files(table) == set()
    table.remove_orphan_files(older_than=now_ms())
    assert files_on_disk(table) == expected_files(table)


def test_stream_commits_skip_identifiers_that_landed(catalog: Catalog) -> None:
    template = make_template(catalog, "aggregation")
    table = template.table
    swb = table.new_stream_write_builder()
    write = swb.new_write()
    rounds = []
    for i in (1, 2):
        write.write_arrow(batch([1, 2], 10 * i))
        rounds.append(pickle.dumps(write.prepare_commit()))
    commit = swb.new_commit()
    first = commit.commit(pickle.loads(rounds[0]), 1)
    assert commit.commit(pickle.loads(rounds[0]), 1) == first  # retried round: no-op
    # A restored job (new process, same commit user) learns which rounds landed, as Paimon's
    # filterCommitted, and a round it commits again is skipped.
    restored = table.new_stream_write_builder().with_commit_user(swb.commit_user).new_commit()
    assert restored.filter_committed([1, 2]) == {2}
    assert restored.commit(pickle.loads(rounds[0]), 1) == first  # landed before: returns its snapshots
    second = restored.commit(pickle.loads(rounds[1]), 2)
    # Once a later round landed, an older one is known committed without looking for its snapshot.
    again = table.new_stream_write_builder().with_commit_user(swb.commit_user).new_commit()
    assert again.commit(pickle.loads(rounds[0]), 1) == []
    assert again.commit(pickle.loads(rounds[1]), 2) == second
    got = {(i, dt): v for (i, dt, v), n in contents(table).items()}
    base = {(i, dt): v for (i, dt, v), n in template.before.items()}
    assert got[(1, "2026-11-02")] == base[(1, "2026-11-02")] + 30
    assert got[(2, "2026-11-01")] == base[(2, "2026-11-01")] + 30


def test_a_listing_that_races_a_concurrent_writers_rename_lists_again(tmp_path) -> None:
    """Three threads committing to a new table: pyarrow's listing of `snapshot/` can fail with
    'Cannot list directory ... No such file' while another writer creates or renames into it
    (pypaimon's test_concurrent_writes_with_retry hit it); the listing is taken again."""
    import pyarrow.fs as pafs

    from lakehouse_engine.io import FileIO

    io = FileIO(pafs.LocalFileSystem())
    (tmp_path / "snapshot").mkdir()
    (tmp_path / "snapshot" / "snapshot-1").write_text("{}")
    real = io.fs
    failures = iter([FileNotFoundError(2, "Cannot list directory")])

    class Racing:
        def get_file_info(self, selector):
            error = next(failures, None)
            if error is not None:
                raise error
            return real.get_file_info(selector)

    io.fs = Racing()  # type: ignore[assignment]
    assert io.list_names(str(tmp_path / "snapshot")) == ["snapshot-1"]
