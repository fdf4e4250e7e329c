"""Many writers, a compactor and an expirer at once: nothing acknowledged is lost, nothing dangles."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from pathlib import Path

import pyarrow as pa

from lakehouse_engine import Catalog, CommitConflictError
from tests.lakehouse_engine.conftest import create_table, read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.int64()),
                    pa.field("commit", pa.int64())])
WRITERS, COMMITS, ROWS = 8, 50, 5


def _writer(warehouse: str, writer: int, ack_path: str) -> None:
    table = Catalog(warehouse).get_table("db.t")
    with open(ack_path, "w") as ack:
        for i in range(COMMITS):
            ids = [writer * 1_000_000 + i * ROWS + j for j in range(ROWS)]
            wb = table.new_batch_write_builder()
            w, c = wb.new_write(), wb.new_commit()
            w.write_arrow(pa.table({"id": ids, "writer": [writer] * ROWS, "commit": [i] * ROWS}, schema=SCHEMA))
            snapshots = c.commit(w.prepare_commit())  # an APPEND, and a COMPACT when the writer compacted
            ack.write(json.dumps({"ids": ids, "snapshots": len(snapshots)}) + "\n")  # once commit() returned
            ack.flush()


def _compactor(warehouse: str, stop_path: str, out_path: str) -> None:
    table = Catalog(warehouse).get_table("db.t")
    done = conflicts = 0
    while True:  # one last pass after the stop file appears
        stopping = os.path.exists(stop_path)
        try:
            done += len(table.compact())
        except CommitConflictError:
            conflicts += 1
        if stopping:
            break
        time.sleep(0.05)
    Path(out_path).write_text(json.dumps({"compactions": done, "conflicts": conflicts}))


def _expirer(warehouse: str, stop_path: str, out_path: str) -> None:
    table = Catalog(warehouse).get_table("db.t")
    expired = 0
    while True:  # one last pass after the stop file appears
        stopping = os.path.exists(stop_path)
        expired += table.expire_snapshots(retain_max=15, retain_min=5, older_than=int(time.time() * 1000))
        if stopping:
            break
        time.sleep(0.1)
    Path(out_path).write_text(json.dumps({"expired": expired}))


def test_writers_compaction_and_expiry_at_once(catalog: Catalog, tmp_path: Path) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "2", "commit.max-retries": "500", "commit.min-retry-wait": "1 ms",
                                  "commit.max-retry-wait": "100 ms", "snapshot.num-retained.min": "1000",
                                  "snapshot.num-retained.max": "100000"})
    ctx = mp.get_context("spawn")
    stop = str(tmp_path / "stop")
    writers = [ctx.Process(target=_writer, args=(catalog.warehouse, w, str(tmp_path / f"ack-{w}")))
               for w in range(WRITERS)]
    helpers = [ctx.Process(target=_compactor, args=(catalog.warehouse, stop, str(tmp_path / "compactor.json"))),
               ctx.Process(target=_expirer, args=(catalog.warehouse, stop, str(tmp_path / "expirer.json")))]
    for p in writers + helpers:
        p.start()
    try:
        for p in writers:
            p.join(timeout=900)
        assert [p.exitcode for p in writers] == [0] * WRITERS
    finally:  # the helpers stop whatever happened to the writers (no process outlives the test)
        Path(stop).touch()
        for p in helpers:
            p.join(timeout=300)
            if p.is_alive():
                p.terminate()
        for p in writers:
            if p.is_alive():
                p.terminate()
    assert [p.exitcode for p in helpers] == [0, 0]
    acks = [json.loads(line) for w in range(WRITERS) for line in (tmp_path / f"ack-{w}").read_text().splitlines()]
    acknowledged = [k for a in acks for k in a["ids"]]
    assert len(acknowledged) == WRITERS * COMMITS * ROWS
    # Every acknowledged row is readable, exactly once.
    got = read(table).column("id").to_pylist()
    assert sorted(got) == sorted(acknowledged)
    # Snapshot ids are contiguous from the earliest retained one to the latest.
    ids = table.snapshot_manager().list_snapshot_ids()
    assert ids == list(range(ids[0], ids[-1] + 1))
    # No file referenced by a retained snapshot is missing: every retained snapshot reads whole.
    for snapshot_id in ids:
        assert read(table, snapshot_id).num_rows > 0
    stats = {**json.loads((tmp_path / "compactor.json").read_text()),
             **json.loads((tmp_path / "expirer.json").read_text())}
    assert stats["expired"] > 0 and ids[0] > 1  # expiry really ran beside the writers
    # Every snapshot is one that a writer or the compactor was told it committed: none lost, none extra.
    assert ids[-1] == sum(a["snapshots"] for a in acks) + stats["compactions"]
