"""Retrying a commit after a fault at each of its file operations: the cases that
tests/lakehouse_engine/test_commit_retry.py asserts and campaign_retry tallies.

A template table holds a short history and one written, uncommitted batch (its CommitMessages
pickled, as a driver holds them). Each case copies the table, commits the batch on a FileIO that
fails the k-th mutating operation (and every later one: the process "dies"), then retries the
same messages in one of three ways and reads the result through a plain FileIO:

- `same committer`: the TableCommit that failed, once its storage works again;
- `same commit user`: a new committer (a new process) restoring the commit user;
- `new commit user`: a new committer under a new commit user (recognised by the batch's files).

On an aggregation table (`sum`) or an append table, a batch applied twice, or not at all, shows.
"""

from __future__ import annotations

import pickle
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog, LakehouseError, Schema
from lakehouse_engine.errors import PostCommitError
from lakehouse_engine.io import FileIO
from lakehouse_engine.io_warehouse import warehouse_file_io
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.table_commit import TableCommit
from tests.support.io_faults import FAULT_MODES, FaultInjectingFileIO, FaultMode

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])
DATES = ("2026-11-01", "2026-11-02")
# Commits expire snapshots and compact buckets as they go, so a commit's I/O includes both.
BUSY = {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3",
        "snapshot.time-retained": "1 ms", "num-sorted-run.compaction-trigger": "2"}
TABLE_KINDS: dict[str, dict[str, Any]] = {
    "aggregation": {"primary_keys": ["id", "dt"], "options": {
        "bucket": "2", "merge-engine": "aggregation", "fields.v.aggregate-function": "sum", **BUSY}},
    "append": {"primary_keys": [], "options": {"bucket": "-1", **BUSY}},
}
RETRIES = ("same committer", "same commit user", "new commit user")


def batch(ids: list[int], v: int) -> pa.Table:
    """Rows (id, dt, v) for `ids`, spread over both partitions."""
    return pa.table({"id": ids, "dt": [DATES[i % 2] for i in ids], "v": [v] * len(ids)}, schema=SCHEMA)


def contents(table: FileStoreTable) -> Counter[tuple[Any, ...]]:
    """Every row the latest snapshot reads, counted (a row read twice counts twice)."""
    clear_manifest_cache()
    rb = table.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return Counter(zip(data.column("id").to_pylist(), data.column("dt").to_pylist(),
                       data.column("v").to_pylist(), strict=True))


@dataclass
class Template:
    """A table with history and one written, uncommitted batch, and the contents to expect."""

    table: FileStoreTable
    messages: bytes  # the batch's pickled CommitMessages
    commit_user: str
    before: Counter[tuple[Any, ...]]
    after: Counter[tuple[Any, ...]]
    data_files: set[str]


def make_template(catalog: Catalog, kind: str) -> Template:
    """Create table `db.<kind>` with three commits, then write (not commit) one more batch."""
    spec = TABLE_KINDS[kind]
    catalog.create_table(f"db.{kind}", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=spec["primary_keys"], options=spec["options"]))
    table = catalog.get_table(f"db.{kind}")
    for i in range(3):
        wb = table.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(batch(list(range(i, i + 6)), i + 1))
        c.commit(w.prepare_commit())
    before = contents(table)
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(batch(list(range(2, 10)), 100))
    messages = w.prepare_commit()
    w.close()
    # What the batch makes the table read, told by committing it once on a throwaway copy.
    probe = _copy(table, Path(table.path).parent / f"probe-{uuid.uuid4().hex}")
    TableCommit(probe.store, wb.commit_user).commit(messages)
    after = contents(probe)
    shutil.rmtree(probe.path)
    return Template(table, pickle.dumps(messages), wb.commit_user, before, after,
                    {f.file_name for m in messages for f in m.new_files})


def _copy(table: FileStoreTable, dest: Path, file_io: FileIO | None = None) -> FileStoreTable:
    shutil.copytree(table.path, dest)
    return FileStoreTable(file_io or warehouse_file_io(str(dest))[0], table.name, str(dest), table.schema)


def count_operations(template: Template, workdir: Path) -> list[tuple[str, str]]:
    """The mutating file operations (kind, path) of committing the template's batch."""
    io = FaultInjectingFileIO.local()
    table = _copy(template.table, workdir / f"count-{uuid.uuid4().hex}", io)
    TableCommit(table.store, template.commit_user).commit(pickle.loads(template.messages))
    return io.operations


def modes_of(kind: str) -> tuple[FaultMode, ...]:
    """The ways an operation of this kind can fail (a delete cannot be half done)."""
    return ("before", "after") if kind == "delete" else FAULT_MODES


@dataclass
class CaseResult:
    """One fault, one retry: what the first commit raised, where the batch landed, what was read."""

    error: BaseException | None
    landed_at: int | None  # the snapshot that added the batch's files after the first attempt
    retry_ids: list[int]
    retry_landed_at: int | None  # the same, after the retry
    got: Counter[tuple[Any, ...]]
    missing_files: set[str] = field(default_factory=set)
    orphans_left: set[str] = field(default_factory=set)  # unreferenced files orphan removal missed
    gone_files: set[str] = field(default_factory=set)  # referenced files orphan removal took

    @property
    def claimed_nothing_committed(self) -> bool:
        """The first error said nothing was committed, yet the batch had landed."""
        return (self.error is not None and self.landed_at is not None
                and "nothing was committed" in str(self.error))


def data_snapshot(table: FileStoreTable, data_files: set[str]) -> int | None:
    """The snapshot whose delta added the batch's data files, if one did."""
    from lakehouse_engine.write.commit_retry import snapshot_adding

    clear_manifest_cache()
    return snapshot_adding(table.store, data_files, 0)


def run_case(template: Template, workdir: Path, k: int, mode: FaultMode, retry: str) -> CaseResult:
    """Fail operation k of the commit in `mode`, retry as `retry`, and look at the table."""
    from tests.lakehouse_engine.maintenance.helpers import (
        expected_files,
        files_on_disk,
        missing_files,
        now_ms,
    )

    case = workdir / f"case-{k}-{mode}-{retry.replace(' ', '-')}"
    io = FaultInjectingFileIO.local(fail_at=k, mode=mode)
    table = _copy(template.table, case, io)
    committer = TableCommit(table.store, template.commit_user)
    error: BaseException | None = None
    first_ids: list[int] = []
    try:
        first_ids = committer.commit(pickle.loads(template.messages))
    except (OSError, LakehouseError) as exc:
        error = exc
    plain = FileStoreTable(warehouse_file_io(str(case))[0], table.name, str(case), table.schema)
    landed_at = data_snapshot(plain, template.data_files)
    messages = pickle.loads(template.messages)
    if retry == "same committer" and error is None:
        retry_ids = first_ids  # it succeeded and said so: a batch committer commits once
    elif retry == "same committer":
        io.fail_at, io.crashed = None, False  # the storage works again
        retry_ids = committer.commit(messages)
    elif retry == "same commit user":
        retry_ids = plain.new_batch_write_builder().with_commit_user(template.commit_user).new_commit().commit(
            messages)
    else:
        retry_ids = plain.new_batch_write_builder().new_commit().commit(messages)
    result = CaseResult(error, landed_at, retry_ids, data_snapshot(plain, template.data_files), contents(plain))
    result.missing_files = missing_files(plain)
    plain.remove_orphan_files(older_than=now_ms())
    on_disk, expected = files_on_disk(plain), expected_files(plain)
    result.orphans_left = on_disk - expected
    result.gone_files = expected - on_disk
    return result


def error_is_clear(result: CaseResult) -> bool:
    """A first error is right for what happened: PostCommitError with the batch's snapshot once
    the batch landed, never one that claims the data is committed when it is not."""
    if result.error is None:
        return result.landed_at is not None
    if result.landed_at is not None:
        return isinstance(result.error, PostCommitError) and result.error.snapshot_ids[:1] == [result.landed_at]
    return not isinstance(result.error, PostCommitError)

