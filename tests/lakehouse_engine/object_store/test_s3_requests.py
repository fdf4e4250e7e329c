"""Requests per commit and per read on S3, counted at the server: bounded, and no listing."""

from __future__ import annotations

import os

import pyarrow as pa

from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
BUCKETS = 2


def _is_listing(request: tuple[str, str, str, int]) -> bool:
    return "list-type" in request[2]


def _upload_step(request: tuple[str, str, str, int]) -> tuple[str, str, int]:
    """(method, step, status) of a multi-part upload request: its first query parameter, the part
    number for a part."""
    name, _, value = request[2].lstrip("?").split("&")[0].partition("=")
    return request[0], f"part {value}" if name == "partNumber" else name, request[3]


def test_a_commit_and_a_read_make_a_bounded_number_of_requests_and_list_nothing(
        s3_warehouse: S3Warehouse) -> None:
    log = s3_warehouse.server.log
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": str(BUCKETS)})
    per_commit = []
    for k in range(4):
        start = log.mark()
        write(table, pa.table({"id": list(range(k * 10, k * 10 + 100)), "v": ["x"] * 100}, schema=SCHEMA))
        per_commit.append(log.since(start, s3_warehouse.bucket))
    # The first commit finds no LATEST hint and lists snapshot/ once; later ones never list.
    for requests in per_commit[1:]:
        assert not [r for r in requests if _is_listing(r)], requests
        puts = [r for r in requests if r[0] == "PUT"]
        # data file per bucket, manifest, two manifest lists, snapshot, LATEST: nothing more
        assert len(puts) == BUCKETS + 5, puts
        assert len(requests) <= 30, requests
    assert sum(1 for r in per_commit[-1] if r[1].endswith("/snapshot/snapshot-4") and r[0] == "PUT") == 1

    fresh = s3_warehouse.catalog().get_table("db.t")  # a new process's view: no cached manifests
    start = log.mark()
    got = read(fresh)
    requests = log.since(start, s3_warehouse.bucket)
    assert got.num_rows == 130
    assert not [r for r in requests if _is_listing(r)], requests
    data_files = {r[1] for r in requests if "/bucket-" in r[1]}
    metadata = [r for r in requests if "/bucket-" not in r[1]]
    # LATEST, the hint's check and the next id, the snapshot, its manifest lists and manifests.
    assert len(metadata) <= 4 + 2 + 4, metadata
    # A HEAD for the size, then the footer and the row groups.
    assert len(requests) - len(metadata) <= 3 * len(data_files), requests
    s3_warehouse.server.report["commit"] = len(per_commit[-1])
    s3_warehouse.server.report["read"] = len(requests)
    s3_warehouse.server.report["read_data_files"] = len(data_files)


def test_a_data_file_above_the_part_size_goes_up_as_a_multipart_upload_with_retried_parts(
        s3_warehouse: S3Warehouse) -> None:
    # pyarrow uploads in parts of 10 MiB once a file outgrows one part: 11 MiB of incompressible
    # bytes make one data file of two parts. One part is throttled once and sent again alone.
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("blob", pa.binary())])
    table = create_table(s3_warehouse.catalog(), "big", schema, ["id"], options={"bucket": "1"})
    blobs = [os.urandom(1024) for _ in range(11 * 1024)]
    log, faults = s3_warehouse.server.log, s3_warehouse.server.faults
    faults.fail("PUT", r"/bucket-0/data-[^?]*\?partNumber=1&", status=503)
    start = log.mark()
    write(table, pa.table({"id": range(len(blobs)), "blob": blobs}, schema=schema))
    data = [_upload_step(r) for r in log.since(start, s3_warehouse.bucket)
            if "/bucket-0/data-" in r[1] and r[0] in ("PUT", "POST")]
    assert sorted(data) == sorted([("POST", "uploads", 200),                            # start
                                   ("PUT", "part 1", 503), ("PUT", "part 1", 200), ("PUT", "part 2", 200),
                                   ("POST", "uploadId", 200)])                          # complete
    got = read(table).sort_by("id")
    assert got.num_rows == len(blobs)
    assert got.column("blob")[5000].as_py() == blobs[5000]
    s3_warehouse.server.report["multipart_data_file_requests"] = len(data)
