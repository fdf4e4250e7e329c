"""Requests per commit and per read on S3, counted at the server: bounded, and no listing."""

from __future__ import annotations

import pyarrow as pa

from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
BUCKETS = 2


def _is_listing(request: tuple[str, str, str, int]) -> bool:
    return "list-type" in request[2]


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
