"""A race of writer processes upserting and deleting the same keys, checked against snapshot order.

Each writer process writes a batch, waits a little (so others commit in between: its commit is
then late and must be re-sequenced), commits, and records (snapshot id, batch) once `commit()`
returned. The table must read as those batches applied in snapshot-id order, before and after a
full compaction (of a DV table: each snapshot without level-0 files, where every commit before it
is looked up). Writers retry a CommitConflictError with a fresh write (a lookup changelog
computed against rows another writer replaced since; a dynamic-bucket writer placing a new key
another writer placed since; a cross-partition writer routing a key another writer committed
elsewhere since). No key may read twice (in two buckets or partitions). Used by
`campaign_concurrency` and by the tests.

The cross-partition modes partition by `p` = `v` mod 3, which the key `id` does not hold, so
nearly every upsert moves its key to another partition (`-D` there, the row in the new one).
Modes with a changelog producer (`lookup`, `lookup-dv`, `lookup-dynamic`,
`lookup-cross-partition`, `full-compaction`) also check the changelog: every snapshot's changes
(read with `read.changes`), concatenated in snapshot order and replayed on the empty table (per
partition and key where keys move), give the table, and every `-U`/`-D` is exactly the row it
replaces (Paimon's before-images). The `full-compaction` writers are stream writers whose every
`full-compaction.delta-commits`-th commit compacts fully, racing a compactor process.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog, CommitConflictError, Schema
from lakehouse_engine.write.table_commit import BATCH_COMMIT_IDENTIFIER, TableCommit
from lakehouse_engine.write.write_builder import StreamTableCommit, StreamWriteBuilder

#: `p` is a function of `v` (v mod 3), so the model of key -> v also says each key's partition.
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string()), pa.field("p", pa.int64(), nullable=False)])
PARTITIONS = 3
MODES = {"fixed": {"bucket": "2"}, "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "8"},
         # Deletion vectors: every commit compacts its level 0 through the lookup and marks rows.
         "dv": {"bucket": "2", "deletion-vectors.enabled": "true"},
         "dv-dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "8", "deletion-vectors.enabled": "true"},
         # Changelog producers: the lookup at flush (and with deletion vectors, at commit too), and
         # full compactions every other stream commit of each writer and by a compactor process.
         "lookup": {"bucket": "2", "changelog-producer": "lookup"},
         "lookup-dv": {"bucket": "2", "changelog-producer": "lookup", "deletion-vectors.enabled": "true"},
         "full-compaction": {"bucket": "2", "changelog-producer": "full-compaction",
                             "full-compaction.delta-commits": "2"},
         # The lookup where writers assign buckets themselves: through the dynamic bucket index
         # (two writers may put a new key in different buckets), and across partitions (a key
         # whose row names another partition moves: -D in the old one, +I in the new).
         "lookup-dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "8", "changelog-producer": "lookup"},
         "cross-partition": {"bucket": "-1", "dynamic-bucket.target-row-num": "8"},
         "lookup-cross-partition": {"bucket": "-1", "dynamic-bucket.target-row-num": "8",
                                    "changelog-producer": "lookup"}}
#: Modes partitioned by `p`, which the primary key does not hold: cross-partition upsert.
PARTITIONED = {"cross-partition", "lookup-cross-partition"}
#: Modes whose writers are stream writers (commit identifiers 1, 2, ...) raced by a compactor process.
STREAMING = {"full-compaction"}
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
    #: Rows that repeat a key (the same key in two buckets or partitions), over the snapshots
    #: checked, and after the full compaction.
    duplicate_rows: int = 0
    duplicate_after_full_compaction: int = 0
    #: Changelog modes: the changelog rows read, the keys whose replay in snapshot order differs
    #: from the table, and the rows breaking a before-image (the first few, described).
    changelog_rows: int = 0
    changelog_wrong_keys: int = 0
    before_image_errors: list[str] = field(default_factory=list)
    #: Full compactions the compactor process committed, and those that lost a race.
    compactions: int = 0
    compactions_lost: int = 0


def _batch(ops: list[Op]) -> pa.Table:
    return pa.table({"id": [k for k, _, _ in ops], "v": [v for _, v, _ in ops], "rk": [r for _, _, r in ops],
                     "p": [v % PARTITIONS for _, v, _ in ops]}, schema=SCHEMA)


def _writer(warehouse: str, writer: int, rounds: int, keys: int, pause_ms: tuple[int, int],
            ack_path: str, streaming: bool) -> None:
    """One writer process: `rounds` commits of a few same-key upserts and deletes (a stream
    writer's commit r under identifier r, so `full-compaction.delta-commits` picks its full ones)."""
    table = Catalog(warehouse).get_table(TABLE)
    rng = random.Random(writer)
    conflicts = 0
    stream: tuple[StreamWriteBuilder, StreamTableCommit] | None = None
    with open(ack_path, "w") as ack:
        for r in range(rounds):
            ops = [(rng.randrange(keys), writer * 1_000_000 + r * 100 + i, "-D" if rng.random() < 0.3 else "+U")
                   for i in range(rng.randint(2, 8))]
            while True:
                if streaming and stream is None:
                    builder = table.new_stream_write_builder()
                    stream = (builder, builder.new_commit())
                wb = stream[0] if stream is not None else table.new_batch_write_builder()
                c: TableCommit = stream[1] if stream is not None else wb.new_commit()
                identifier = r + 1 if stream is not None else BATCH_COMMIT_IDENTIFIER
                w = wb.new_write()
                w.write_arrow(_batch(ops))
                messages = w.prepare_commit(identifier)
                written = [f.file_name for m in messages for f in m.new_files]
                time.sleep(rng.uniform(*pause_ms) / 1000)  # others commit meanwhile: ours is late
                try:
                    ids = c.commit(messages, identifier)
                except CommitConflictError:
                    c.abort(messages)
                    conflicts += 1
                    # A stream commits round r again under a new commit user (a retry under the
                    # same user must repeat its messages).
                    stream = None
                    continue
                break
            # The committer rewrites late files under new names (in the messages, in place).
            resequenced = written != [f.file_name for m in messages for f in m.new_files]
            ack.write(json.dumps({"snapshot": ids[0], "ops": ops, "resequenced": resequenced}) + "\n")
            ack.flush()
    Path(ack_path + ".conflicts").write_text(str(conflicts))


def _compactor(warehouse: str, stop_path: str, pause_ms: tuple[int, int], report_path: str) -> None:
    """A compactor process: full compactions of the table, a pause apart, until `stop_path` exists;
    a compaction that loses to a writer's commit is counted and the next one tries again."""
    table = Catalog(warehouse).get_table(TABLE)
    rng = random.Random(-1)
    done = lost = 0
    while not Path(stop_path).exists():
        try:
            done += bool(table.compact(full=True))
        except CommitConflictError:
            lost += 1
        time.sleep(rng.uniform(*pause_ms) / 1000)
    Path(report_path).write_text(json.dumps([done, lost]))


def _apply(model: dict[int, int], ops: list[Op]) -> None:
    for k, v, kind in ops:
        if kind == "-D":
            model.pop(k, None)
        else:
            model[k] = v


def _state(table: Any, snapshot_id: int | None = None) -> tuple[dict[int, int], int]:
    """The table's key -> v (at `snapshot_id`), and how many rows repeat a key (a key in two
    buckets or partitions: each merges on its own, so both rows read)."""
    rb = table.new_read_builder()
    if snapshot_id is not None:
        rb = rb.with_snapshot(snapshot_id)
    t = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    rows = dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
    return rows, t.num_rows - len(rows)


def _differences(expected: dict[int, int], actual: dict[int, int]) -> tuple[int, int]:
    lost = sum(1 for k in expected if k not in actual)
    wrong = sum(1 for k, v in actual.items() if expected.get(k) != v)
    return lost, wrong


def _changelog(table: Any, partitioned: bool) -> tuple[dict[int, int], list[str], int]:
    """Every snapshot's changes in snapshot order replayed on the empty table (the state they give),
    the rows whose before-image is not the row the changes before them left, and the row count.

    A partitioned table's changes are replayed per (partition, key): a key that moved has its
    `-D` in the old partition and `+I` in the new, in either order within the snapshot; after
    each snapshot, no key may be in two partitions."""
    state: dict[Any, int] = {}
    errors: list[str] = []
    changes = table.changes(0)
    # Per key, its -U read and not yet followed by its +U: a key's -U and +U are in order in one
    # snapshot with no other change of the key between them, not necessarily adjacent (a lookup
    # changelog lists a bucket's before-images, then the run's data files as its after-images).
    pending: dict[Any, int] = {}
    snapshot: int | None = -1
    ids = changes.column("id").to_pylist()
    keys = list(zip(changes.column("p").to_pylist(), ids, strict=True)) if partitioned else ids
    columns = [changes.column(c).to_pylist() for c in ("_snapshot_id", "_row_kind")]
    # The snapshot being replayed and the (partition, key) pairs it changed, checked when it ends.
    touched: tuple[int, set[Any]] = (-1, set())
    rows = list(zip(*columns, keys, changes.column("v").to_pylist(), strict=True))
    for sid, kind, k, v in rows + [(None, None, None, None)]:
        if sid != snapshot:
            if pending:
                errors.append(f"snapshot {snapshot}: the -U of keys {sorted(pending, key=repr)} has no +U")
            pending, snapshot = {}, sid
        if partitioned and sid != touched[0]:
            for key in sorted({key for _, key in touched[1]}):
                if sum(1 for p in range(PARTITIONS) if (p, key) in state) > 1:
                    errors.append(f"snapshot {touched[0]} leaves key {key} in two partitions")
            touched = (sid, set())
        if sid is None:
            break
        if partitioned:
            touched[1].add(k)
        where = f"snapshot {sid}: {kind} of key {k} = {v}"
        if kind == "+U" and k not in pending:
            errors.append(f"{where} follows no -U of its key")
        elif kind != "+U" and k in pending:
            errors.append(f"{where}: the -U before it has no +U")
        if kind in ("-U", "-D") and (k not in state or state[k] != v):
            errors.append(f"{where}, but the key's row was {state.get(k)}")
        elif kind == "+I" and k in state:
            errors.append(f"{where}, but the key holds {state[k]}")
        if kind in ("+I", "+U"):
            state[k] = v
        else:
            state.pop(k, None)
        pending.pop(k, None)
        if kind == "-U":
            pending[k] = v
    # (A key in two partitions at the end was reported with its snapshot above.)
    replayed = {(k[1] if partitioned else k): v for k, v in state.items()}
    return replayed, errors, changes.num_rows


def run_race(workdir: Path, mode: str, writers: int = 3, rounds: int = 12, keys: int = 8,
             pause_ms: tuple[int, int] = (100, 300), timeout_s: float = 600) -> RaceReport:
    """Race `writers` processes of `rounds` commits each on a fresh table in `workdir`."""
    warehouse = str(workdir / f"warehouse-{mode}")
    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    options = {"rowkind.field": "rk", "commit.max-retries": "200", "commit.min-retry-wait": "1 ms",
               "commit.max-retry-wait": "50 ms", "snapshot.num-retained.min": "100000",
               "snapshot.num-retained.max": "100000", **MODES[mode]}
    partitioned = mode in PARTITIONED
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["p"] if partitioned else None, primary_keys=["id"], options=options))
    table = catalog.get_table(TABLE)
    # Every key exists first, so dynamic-bucket writers mostly update keys their bucket owns.
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_batch([(k, -1, "+I") for k in range(keys)]))
    c.commit(w.prepare_commit())
    ctx = mp.get_context("spawn")
    acks = [str(workdir / f"ack-{mode}-{i}") for i in range(writers)]
    streaming = mode in STREAMING
    procs = [ctx.Process(target=_writer, args=(warehouse, i, rounds, keys, pause_ms, acks[i], streaming))
             for i in range(writers)]
    stop, compacted = workdir / f"stop-{mode}", workdir / f"compactions-{mode}"
    compactor = (ctx.Process(target=_compactor, args=(warehouse, str(stop), pause_ms, str(compacted)))
                 if streaming else None)
    for p in procs + ([compactor] if compactor is not None else []):
        p.start()
    try:
        for p in procs:
            p.join(timeout=timeout_s)
        stop.touch()
        if compactor is not None:
            compactor.join(timeout=timeout_s)
        codes = [p.exitcode for p in procs + ([compactor] if compactor is not None else [])]
        if any(code != 0 for code in codes):
            raise RuntimeError(f"writer (and compactor) processes exited with {codes}")
    finally:
        for p in procs + ([compactor] if compactor is not None else []):  # no process outlives the race
            if p.is_alive():
                p.kill()
    records = sorted((json.loads(line) for a in acks for line in Path(a).read_text().splitlines()),
                     key=lambda r: r["snapshot"])
    table = Catalog(warehouse).get_table(TABLE)
    # Every snapshot must read as the commits up to it, in snapshot order (not only the last one,
    # where later writes would hide a wrong winner of an earlier race).
    model = {k: -1 for k in range(keys)}
    lost = wrong = checked = duplicated = 0
    dv = "deletion-vectors.enabled" in options
    pending = iter(records)
    upcoming = next(pending, None)
    for snapshot in table.snapshots()[1:]:
        while upcoming is not None and upcoming["snapshot"] <= snapshot.id:
            _apply(model, upcoming["ops"])
            upcoming = next(pending, None)
        if dv and any(e.file.level == 0 for e in table.store.manifest_io().live_entries(snapshot)):
            continue
        rows, repeated = _state(table, snapshot.id)
        missing, bad = _differences(model, rows)
        lost, wrong, checked, duplicated = lost + missing, wrong + bad, checked + 1, duplicated + repeated
    resequenced = sum(1 for r in records if r["resequenced"])
    table.compact(full=True)
    final, repeated_c = _state(table)
    lost_c, wrong_c = _differences(model, final)
    conflicts = sum(int(Path(a + ".conflicts").read_text()) for a in acks)
    report = RaceReport(len(records), conflicts, resequenced, lost, wrong, lost_c, wrong_c, checked,
                        duplicate_rows=duplicated, duplicate_after_full_compaction=repeated_c)
    if compactor is not None:
        report.compactions, report.compactions_lost = json.loads(compacted.read_text())
    if options.get("changelog-producer", "none") != "none":
        # (After the full compaction: a full-compaction changelog is complete there.)
        replayed, report.before_image_errors, report.changelog_rows = _changelog(table, partitioned)
        table_rows = final
        report.changelog_wrong_keys = sum(1 for k in set(replayed) | set(table_rows)
                                          if replayed.get(k) != table_rows.get(k))
    return report
