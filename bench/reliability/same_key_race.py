"""A race of writer processes upserting and deleting the same keys, checked against snapshot order.

Each writer process writes a batch, waits a little (so others commit in between: its commit is
then late and must be re-sequenced), commits, and records (snapshot id, batch) once `commit()`
returned. The table must read as those batches applied in snapshot-id order, before and after a
full compaction (of a DV table: each snapshot without level-0 files, where every commit before it
is looked up). Dynamic-bucket writers retry a CommitConflictError (two writers assigned the
same new key) with a fresh write. Used by `campaign_concurrency` and by the tests.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog, CommitConflictError, Schema

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string())])
MODES = {"fixed": {"bucket": "2"}, "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "8"},
         # Deletion vectors: every commit compacts its level 0 through the lookup and marks rows.
         "dv": {"bucket": "2", "deletion-vectors.enabled": "true"},
         "dv-dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "8", "deletion-vectors.enabled": "true"}}
TABLE = "db.race"
Op = tuple[int, int, str]


@dataclass
class RaceReport:
    """What a race committed and how the table read it, against the snapshot-order model."""

    commits: int
    conflicts_retried: int
    resequenced_commits: int
    lost_rows: int
    wrong_rows: int
    lost_after_full_compaction: int
    wrong_after_full_compaction: int
    #: Snapshots checked against the model (a DV table's snapshots holding level-0 files are not:
    #: their newest rows are not yet looked up, invisible as in Paimon).
    snapshots_checked: int = 0


def _batch(ops: list[Op]) -> pa.Table:
    return pa.table({"id": [k for k, _, _ in ops], "v": [v for _, v, _ in ops], "rk": [r for _, _, r in ops]},
                    schema=SCHEMA)


def _writer(warehouse: str, writer: int, rounds: int, keys: int, pause_ms: tuple[int, int],
            ack_path: str) -> None:
    """One writer process: `rounds` commits of a few same-key upserts and deletes."""
    table = Catalog(warehouse).get_table(TABLE)
    rng = random.Random(writer)
    conflicts = 0
    with open(ack_path, "w") as ack:
        for r in range(rounds):
            ops = [(rng.randrange(keys), writer * 1_000_000 + r * 100 + i, "-D" if rng.random() < 0.3 else "+U")
                   for i in range(rng.randint(2, 8))]
            while True:
                wb = table.new_batch_write_builder()
                w, c = wb.new_write(), wb.new_commit()
                w.write_arrow(_batch(ops))
                messages = w.prepare_commit()
                written = [f.file_name for m in messages for f in m.new_files]
                time.sleep(rng.uniform(*pause_ms) / 1000)  # others commit meanwhile: ours is late
                try:
                    ids = c.commit(messages)
                except CommitConflictError:
                    c.abort(messages)
                    conflicts += 1
                    continue
                break
            # The committer rewrites late files under new names (in the messages, in place).
            resequenced = written != [f.file_name for m in messages for f in m.new_files]
            ack.write(json.dumps({"snapshot": ids[0], "ops": ops, "resequenced": resequenced}) + "\n")
            ack.flush()
    Path(ack_path + ".conflicts").write_text(str(conflicts))


def _apply(model: dict[int, int], ops: list[Op]) -> None:
    for k, v, kind in ops:
        if kind == "-D":
            model.pop(k, None)
        else:
            model[k] = v


def _state(table: Any, snapshot_id: int | None = None) -> dict[int, int]:
    rb = table.new_read_builder()
    if snapshot_id is not None:
        rb = rb.with_snapshot(snapshot_id)
    t = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


def _differences(expected: dict[int, int], actual: dict[int, int]) -> tuple[int, int]:
    lost = sum(1 for k in expected if k not in actual)
    wrong = sum(1 for k, v in actual.items() if expected.get(k) != v)
    return lost, wrong


def run_race(workdir: Path, mode: str, writers: int = 3, rounds: int = 12, keys: int = 8,
             pause_ms: tuple[int, int] = (100, 300), timeout_s: float = 600) -> RaceReport:
    """Race `writers` processes of `rounds` commits each on a fresh table in `workdir`."""
    warehouse = str(workdir / f"warehouse-{mode}")
    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    options = {"rowkind.field": "rk", "commit.max-retries": "200", "commit.min-retry-wait": "1 ms",
               "commit.max-retry-wait": "50 ms", "snapshot.num-retained.min": "100000",
               "snapshot.num-retained.max": "100000", **MODES[mode]}
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options=options))
    table = catalog.get_table(TABLE)
    # Every key exists first, so dynamic-bucket writers mostly update keys their bucket owns.
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_batch([(k, -1, "+I") for k in range(keys)]))
    c.commit(w.prepare_commit())
    ctx = mp.get_context("spawn")
    acks = [str(workdir / f"ack-{mode}-{i}") for i in range(writers)]
    procs = [ctx.Process(target=_writer, args=(warehouse, i, rounds, keys, pause_ms, acks[i]))
             for i in range(writers)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout=timeout_s)
        codes = [p.exitcode for p in procs]
        if codes != [0] * writers:
            raise RuntimeError(f"writer processes exited with {codes}")
    finally:
        for p in procs:  # no writer outlives the race
            if p.is_alive():
                p.kill()
    records = sorted((json.loads(line) for a in acks for line in Path(a).read_text().splitlines()),
                     key=lambda r: r["snapshot"])
    table = Catalog(warehouse).get_table(TABLE)
    # Every snapshot must read as the commits up to it, in snapshot order (not only the last one,
    # where later writes would hide a wrong winner of an earlier race).
    model = {k: -1 for k in range(keys)}
    lost = wrong = checked = 0
    dv = "deletion-vectors.enabled" in options
    pending = iter(records)
    upcoming = next(pending, None)
    for snapshot in table.snapshots()[1:]:
        while upcoming is not None and upcoming["snapshot"] <= snapshot.id:
            _apply(model, upcoming["ops"])
            upcoming = next(pending, None)
        if dv and any(e.file.level == 0 for e in table.store.manifest_io().live_entries(snapshot)):
            continue
        missing, bad = _differences(model, _state(table, snapshot.id))
        lost, wrong, checked = lost + missing, wrong + bad, checked + 1
    resequenced = sum(1 for r in records if r["resequenced"])
    table.compact(full=True)
    lost_c, wrong_c = _differences(model, _state(table))
    conflicts = sum(int(Path(a + ".conflicts").read_text()) for a in acks)
    return RaceReport(len(records), conflicts, resequenced, lost, wrong, lost_c, wrong_c, checked)
