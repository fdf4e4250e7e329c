"""Throttling and 5xx answers from the server: reads and plain writes are retried with backoff; a
conditional put is retried only after reading the object back, so a put that landed is never
mistaken for a lost race and never put twice."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine.errors import StorageError, TableAlreadyExistError
from lakehouse_engine.io_object_store import ObjectStoreFileIO
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": list(ids), "v": [str(i) for i in ids]}, schema=SCHEMA)


def _answers(s3: S3Warehouse, start: int, method: str, fragment: str) -> list[int]:
    """The statuses the server answered to `method` requests on paths containing `fragment`."""
    return [r[3] for r in s3.server.log.since(start, s3.bucket) if r[0] == method and fragment in r[1]]


def test_plain_writes_are_retried_on_throttling_and_5xx(s3_warehouse: S3Warehouse) -> None:
    faults, log = s3_warehouse.server.faults, s3_warehouse.server.log
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    start = log.mark()
    faults.fail("PUT", r"/bucket-0/data-", status=503)          # SlowDown on the data file
    faults.fail("PUT", r"/manifest/manifest-list-", status=500)  # and on a small file
    assert write(table, _rows(range(10))) == [1]
    assert _answers(s3_warehouse, start, "PUT", "/bucket-0/data-") == [503, 200]
    assert _answers(s3_warehouse, start, "PUT", "/manifest/manifest-list-")[:2] == [500, 200]
    assert sorted(read(table).column("id").to_pylist()) == list(range(10))


def test_reads_are_retried_on_throttling_and_5xx(s3_warehouse: S3Warehouse) -> None:
    faults, log = s3_warehouse.server.faults, s3_warehouse.server.log
    write(create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"}),
          _rows(range(10)))
    fresh = s3_warehouse.catalog().get_table("db.t")  # nothing cached: every file is read
    start = log.mark()
    faults.fail("GET", r"/snapshot/snapshot-1$", status=503, times=2)  # a whole object (obstore)
    faults.fail("GET", r"/bucket-0/data-", status=500)                 # ranged reads (pyarrow)
    assert sorted(read(fresh).column("id").to_pylist()) == list(range(10))
    assert _answers(s3_warehouse, start, "GET", "/snapshot/snapshot-1")[:3] == [503, 503, 200]
    assert _answers(s3_warehouse, start, "GET", "/bucket-0/data-")[:2] == [500, 206]


def test_a_snapshot_put_throttled_before_landing_is_put_again_after_a_read_back(
        s3_warehouse: S3Warehouse) -> None:
    faults, log = s3_warehouse.server.faults, s3_warehouse.server.log
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    start = log.mark()
    faults.fail("PUT", r"/snapshot/snapshot-1$", status=503)
    assert write(table, _rows(range(5))) == [1]
    snapshot_requests = [(r[0], r[3]) for r in log.since(start, s3_warehouse.bucket)
                         if r[1].endswith("/snapshot/snapshot-1")]
    assert snapshot_requests[:3] == [("PUT", 503), ("GET", 404), ("PUT", 200)]


def test_a_snapshot_put_that_landed_but_was_answered_500_is_committed_with_one_put(
        s3_warehouse: S3Warehouse) -> None:
    faults, log = s3_warehouse.server.faults, s3_warehouse.server.log
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    start = log.mark()
    faults.fail("PUT", r"/snapshot/snapshot-1$", status=500, after=True)
    assert write(table, _rows(range(5))) == [1]
    puts = _answers(s3_warehouse, start, "PUT", "/snapshot/snapshot-1")
    assert puts == [500]  # landed: recognised by reading it back, never put again
    assert _answers(s3_warehouse, start, "GET", "/snapshot/snapshot-1")[0] == 200
    assert table.snapshot_manager().latest_snapshot_id() == 1
    assert sorted(read(table).column("id").to_pylist()) == list(range(5))


def test_a_schema_put_that_landed_but_was_answered_500_creates_the_table_once(
        s3_warehouse: S3Warehouse) -> None:
    s3_warehouse.server.faults.fail("PUT", r"/t/schema/schema-0$", status=500, after=True)
    catalog = s3_warehouse.catalog()
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    assert table.schema.id == 0
    with pytest.raises(TableAlreadyExistError):
        create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})


def test_an_unanswered_put_over_another_committers_object_is_a_lost_race(s3_warehouse: S3Warehouse) -> None:
    catalog = s3_warehouse.catalog()
    fio = catalog.file_io
    assert isinstance(fio, ObjectStoreFileIO)
    path = f"{catalog.root}/db.db/x/snapshot/snapshot-7"
    assert fio.try_put_if_absent(path, b"theirs")
    s3_warehouse.server.faults.fail("PUT", r"/snapshot-7$", status=503)
    assert not fio.try_put_if_absent(path, b"ours")       # read back: not ours
    s3_warehouse.server.faults.fail("PUT", r"/snapshot-7$", status=500, after=True)
    assert not fio.try_put_if_absent(path, b"ours")       # 412 applied after the error: still theirs
    assert fio.read_bytes(path) == b"theirs"


def test_a_snapshot_put_unanswered_on_every_attempt_commits_nothing_and_can_be_retried(
        s3_warehouse: S3Warehouse) -> None:
    table = create_table(s3_warehouse.catalog(**{"s3.attempts.maximum": "2"}), "t", SCHEMA, ["id"],
                         options={"bucket": "1"})
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(range(3)))
    messages = w.prepare_commit()
    s3_warehouse.server.faults.fail("PUT", r"/snapshot/snapshot-1$", status=503, times=2)
    with pytest.raises(StorageError, match=r"snapshot-1.*nothing was committed"):
        c.commit(messages)
    assert table.snapshot_manager().latest_snapshot_id() is None
    assert c.commit(messages) == [1]
    assert sorted(read(table).column("id").to_pylist()) == [0, 1, 2]
