"""Writers of the same keys at once, beyond deduplicate: with `sequence.field`, the field decides
first and the commit order breaks its ties; partial-update and aggregation tables written by
concurrent committers read as their commits applied in snapshot order, before and after a full
compaction (`write/resequence.py`)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CommitConflictError
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write


def _open(table: FileStoreTable, batch: pa.Table) -> tuple[Any, Any]:
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(batch)
    return w, c


def _commit(writer: tuple[Any, Any]) -> int:
    w, c = writer
    ids = c.commit(w.prepare_commit())
    w.close()
    c.close()
    return max(ids)


def _rows(table: FileStoreTable) -> dict[int, tuple[Any, ...]]:
    t = read(table).to_pylist()
    return {r["id"]: tuple(v for k, v in r.items() if k != "id") for r in t}


# ---- sequence.field ---------------------------------------------------------------------------
SEQ_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()),
                        ("v", pa.string())])


@pytest.mark.parametrize("bucket", ["1", "-1"])
def test_with_sequence_field_the_field_decides_first_and_commit_order_breaks_ties(
        catalog: Catalog, bucket: str) -> None:
    table = create_table(catalog, "t", SEQ_SCHEMA, primary_keys=["id"],
                         options={"bucket": bucket, "sequence.field": "ts"})
    write(table, pa.table({"id": [1, 2, 3], "ts": [0, 0, 0], "v": ["v0"] * 3}, schema=SEQ_SCHEMA))
    # Both writers start from snapshot 1, so their rows get the same sequence numbers.
    a = _open(table, pa.table({"id": [1, 2], "ts": [5, 9], "v": ["a", "a"]}, schema=SEQ_SCHEMA))
    b = _open(table, pa.table({"id": [2, 1, 3], "ts": [3, 5, 0], "v": ["b", "b", "b"]},
                              schema=SEQ_SCHEMA))
    _commit(a)
    _commit(b)
    # key 1: ts ties (5), the later commit (b) wins; key 2: a's ts 9 beats b's 3, whatever the
    # commit order; key 3: ts ties with the base row (0), b committed later.
    expected = {1: (5, "b"), 2: (9, "a"), 3: (0, "b")}
    assert _rows(table) == expected
    table.compact(full=True)
    assert _rows(table) == expected


# ---- partial-update and aggregation under concurrent committers --------------------------------
ENGINE_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.int64()),
                           ("b", pa.string())])
ENGINES = {
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.a.aggregate-function": "sum",
                    "fields.b.aggregate-function": "last_non_null_value"},
}
Record = tuple[int, int | None, str | None]


def _model(engine: str, commits: list[tuple[int, list[Record]]]) -> dict[int, tuple[Any, ...]]:
    """The table as the commits applied one after another in snapshot-id order."""
    state: dict[int, list[Any]] = {}
    for _, records in sorted(commits):
        for key, a, b in records:
            row = state.setdefault(key, [None, None])
            if engine == "aggregation" and a is not None:
                row[0] = a if row[0] is None else row[0] + a
            elif a is not None:
                row[0] = a
            if b is not None:
                row[1] = b
    return {k: tuple(v) for k, v in state.items()}


def _race(table: FileStoreTable, writers: int, rounds: int, keys: int,
          pause_ms: int) -> list[tuple[int, list[Record]]]:
    """`writers` threads, each committing `rounds` batches of the same few keys with a random
    pause between write and commit (so others commit in between); (snapshot id, records) of
    every acknowledged commit."""
    acks: list[tuple[int, list[Record]]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run(writer: int) -> None:
        rng = random.Random(writer)
        try:
            for r in range(rounds):
                ids = rng.sample(range(keys), rng.randint(1, keys))
                records: list[Record] = [
                    (k, rng.choice([None, writer * 100 + r]), rng.choice([None, f"w{writer}r{r}"]))
                    for k in ids]
                batch = pa.table({"id": [k for k, _, _ in records], "a": [a for _, a, _ in records],
                                  "b": [b for _, _, b in records]}, schema=ENGINE_SCHEMA)
                while True:
                    w = _open(table, batch)
                    time.sleep(rng.uniform(0, pause_ms) / 1000)
                    try:
                        snapshot_id = _commit(w)
                        break
                    except CommitConflictError:
                        # Dynamic bucket: two writers gave one new key two buckets; nothing
                        # landed, so the batch is written again.
                        w[0].close()
                        w[1].close()
                with lock:
                    acks.append((snapshot_id, records))
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return acks


def _check_race(catalog: Catalog, engine: str, bucket: str, writers: int, rounds: int,
                keys: int, pause_ms: int) -> None:
    table = create_table(catalog, "t", ENGINE_SCHEMA, primary_keys=["id"],
                         options={"bucket": bucket, **ENGINES[engine]})
    acks = _race(table, writers, rounds, keys, pause_ms)
    assert len({s for s, _ in acks}) == writers * rounds
    expected = _model(engine, acks)
    assert _rows(table) == expected
    table.compact(full=True)
    assert _rows(catalog.get_table("db.t")) == expected


@pytest.mark.parametrize("engine", list(ENGINES))
def test_concurrent_committers_of_the_same_keys_read_in_snapshot_order(
        catalog: Catalog, engine: str) -> None:
    _check_race(catalog, engine, "2", writers=3, rounds=3, keys=4, pause_ms=30)


@pytest.mark.slow
@pytest.mark.parametrize("bucket", ["2", "-1"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_soak_concurrent_committers_of_the_same_keys_read_in_snapshot_order(
        catalog: Catalog, engine: str, bucket: str) -> None:
    _check_race(catalog, engine, bucket, writers=4, rounds=15, keys=6, pause_ms=100)
