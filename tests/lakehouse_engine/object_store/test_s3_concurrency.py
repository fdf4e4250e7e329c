"""Several committer processes on one S3 table: every acknowledged commit is present, no snapshot
is overwritten; a store without conditional put refuses to commit unless a lock is configured."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.io_object_store import ConditionalPutUnsupportedError
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.int64())])
WRITERS, COMMITS, ROWS = 3, 5, 3


def _committer(warehouse: str, options: dict[str, str], writer: int, ack_path: str) -> None:
    table = Catalog(warehouse, options).get_table("db.t")
    with open(ack_path, "w") as ack:
        for i in range(COMMITS):
            ids = [writer * 1_000_000 + i * ROWS + j for j in range(ROWS)]
            wb = table.new_batch_write_builder()
            w, c = wb.new_write(), wb.new_commit()
            w.write_arrow(pa.table({"id": ids, "writer": [writer] * ROWS}, schema=SCHEMA))
            snapshots = c.commit(w.prepare_commit())
            # Written only once commit() returned: an acknowledged commit.
            ack.write(json.dumps({"ids": ids, "snapshots": snapshots, "user": c.commit_user}) + "\n")
            ack.flush()


def _run_committers(s3_warehouse: S3Warehouse, tmp_path: Path, options: dict[str, str]) -> list[dict]:
    ctx = mp.get_context("spawn")  # pyarrow's and obstore's clients hold threads: never fork them
    procs = [ctx.Process(target=_committer, args=(s3_warehouse.uri, options, w, str(tmp_path / f"ack-{w}")))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0, f"committer process failed with exit code {p.exitcode}"
    return [json.loads(line) for w in range(WRITERS) for line in (tmp_path / f"ack-{w}").read_text().splitlines()]


def _assert_every_acknowledged_commit_present(s3_warehouse: S3Warehouse, options: dict[str, str],
                                              acks: list[dict]) -> None:
    table = Catalog(s3_warehouse.uri, options).get_table("db.t")
    assert len(acks) == WRITERS * COMMITS
    snapshots = table.snapshot_manager()
    claimed: dict[int, str] = {}
    for ack in acks:
        for sid in ack["snapshots"]:
            assert sid not in claimed, f"snapshot {sid} acknowledged to two committers"
            claimed[sid] = ack["user"]
            # The snapshot file a committer was told it wrote is still its own: not overwritten.
            assert snapshots.snapshot(sid).commit_user == ack["user"]
    latest = snapshots.latest_snapshot_id()
    assert latest is not None and sorted(claimed) == list(range(1, latest + 1))
    got = set(read(table).column("id").to_pylist())
    expected = {i for ack in acks for i in ack["ids"]}
    assert expected <= got and len(got) == WRITERS * COMMITS * ROWS


def test_concurrent_committer_processes_lose_no_snapshot(s3_warehouse: S3Warehouse, tmp_path: Path) -> None:
    options = {**s3_warehouse.options, "write-only": "true"}
    # Every commit races the others for the next id: give them room to lose a few times.
    create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"],
                 options={"bucket": "1", "commit.max-retries": "100"})
    acks = _run_committers(s3_warehouse, tmp_path, options)
    _assert_every_acknowledged_commit_present(s3_warehouse, options, acks)


def test_store_without_conditional_put_refuses_to_commit_without_a_lock(s3_warehouse: S3Warehouse) -> None:
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    unsafe = s3_warehouse.catalog(**{"fs.conditional-put": "false"}).get_table("db.t")
    with pytest.raises(ConditionalPutUnsupportedError, match=r"lock\.enabled=true"):
        write(unsafe, pa.table({"id": [1], "writer": [0]}, schema=SCHEMA))
    assert table.latest_snapshot() is None  # nothing committed
    with pytest.raises(ConditionalPutUnsupportedError, match="no conditional put"):
        s3_warehouse.catalog(**{"fs.conditional-put": "false"}).create_table(
            "db.other", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    assert not s3_warehouse.catalog().table_exists("db.other")


def test_store_without_conditional_put_commits_safely_under_a_lock(s3_warehouse: S3Warehouse,
                                                                    tmp_path: Path) -> None:
    options = {**s3_warehouse.options, "write-only": "true", "fs.conditional-put": "false",
               "lock.enabled": "true", "lock.dir": str(tmp_path / "locks")}
    # Every commit races the others for the next id: give them room to lose a few times.
    create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"],
                 options={"bucket": "1", "commit.max-retries": "100"})
    acks = _run_committers(s3_warehouse, tmp_path, options)
    _assert_every_acknowledged_commit_present(s3_warehouse, options, acks)
