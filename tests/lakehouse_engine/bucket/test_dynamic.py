"""Dynamic bucket mode: the hash index, assignment rules, parallel assigners and concurrent writers."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CommitConflictError, LakehouseError
from lakehouse_engine.bucket.dynamic import DynamicBucketAssigner, assigner_of
from lakehouse_engine.bucket.hash_index import PartitionHashIndex, decode_hashes, encode_hashes
from lakehouse_engine.format.bucket_hash import hash_rows
from lakehouse_engine.partition import PartitionCodec
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])


def batch(ids: np.ndarray | list[int], v: int, dt: str = "a") -> pa.Table:
    ids = np.asarray(ids, dtype=np.int64)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": np.full(len(ids), v)}, schema=SCHEMA)


def dynamic_table(catalog: Catalog, name: str = "t", **options: str):
    return create_table(catalog, name, SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": "-1", "dynamic-bucket.target-row-num": "1000", **options})


def bucket_of_each_key(table) -> dict[int, int]:
    out = {}
    rb = table.new_read_builder().with_projection(["id"])
    for split in rb.new_scan().plan().splits():
        for key in rb.new_read().read_split(split).column("id").to_pylist():
            assert key not in out, f"key {key} in two buckets"
            out[key] = split.bucket
    return out


def test_hash_index_round_trip_lookup_and_memory() -> None:
    rng = np.random.default_rng(3)
    hashes = np.unique(rng.integers(-2**31, 2**31 - 1, 200_000).astype(np.int32))
    buckets = (np.arange(len(hashes)) % 97).astype(np.int16)
    idx = PartitionHashIndex(hashes[:1000], buckets[:1000])
    idx.add(hashes[1000:], buckets[1000:])
    assert len(idx) == len(hashes)
    assert (idx.lookup(hashes) == buckets).all()
    assert (idx.lookup(np.array([hashes.max() + 1 if hashes.max() < 2**31 - 1 else hashes.min() - 1], np.int32)) == -1).all()
    assert idx.nbytes / len(idx) <= 16  # the memory bound per indexed key
    assert sorted(idx.hashes_of(5).tolist()) == sorted(hashes[buckets == 5].tolist())
    assert idx.bucket_rows[5] == int((buckets == 5).sum())
    assert (decode_hashes(encode_hashes(hashes), "x") == hashes).all()
    assert encode_hashes(np.array([1], np.int32)) == b"\x00\x00\x00\x01"  # big-endian, as Paimon


def test_fifty_thousand_keys_fill_buckets_up_to_the_target(catalog: Catalog) -> None:
    table = dynamic_table(catalog)
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(batch(np.arange(50_000), 0))
    messages = w.prepare_commit()
    c.commit(messages)
    stats = table.bucket_stats()
    counts = stats.column("record_count").to_pylist()
    assert len(counts) >= 50 and max(counts) <= 1000 and sum(counts) == 50_000
    assert set(stats.column("total_buckets").to_pylist()) == {-1}
    assert sum(m.inserted_keys or 0 for m in messages) == 50_000
    assert sum(m.updated_keys or 0 for m in messages) == 0
    index = table.store.manifest_io().read_index_manifest(table.latest_snapshot().index_manifest)
    assert {e.index_type for e in index} == {"HASH"} and sum(e.row_count for e in index) == 50_000


def _update_in_another_process(warehouse: str) -> None:
    table = Catalog(warehouse).get_table("db.t")
    write(table, batch(np.arange(0, 20_000, 3), 1))


def test_a_second_writer_process_restores_the_index_and_updates_keep_their_buckets(catalog: Catalog) -> None:
    table = dynamic_table(catalog)
    write(table, batch(np.arange(20_000), 0))
    before = bucket_of_each_key(table)
    proc = mp.get_context("spawn").Process(target=_update_in_another_process, args=(catalog.warehouse,))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0
    after = bucket_of_each_key(table)
    assert after == before  # no key moved, none duplicated
    got = {r["id"]: r["v"] for r in read(table).to_pylist()}
    assert len(got) == 20_000 and sum(got.values()) == len(range(0, 20_000, 3))


def test_new_keys_go_to_non_full_buckets_before_new_ones(catalog: Catalog) -> None:
    table = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "10"})
    write(table, batch(np.arange(15), 0))   # buckets 0 (10 keys) and 1 (5 keys)
    write(table, batch(np.arange(15, 22), 0))  # 5 fill bucket 1, then 2 open bucket 2
    assert sorted(table.bucket_stats().column("bucket").to_pylist()) == [0, 1, 2]
    assert Counter(bucket_of_each_key(table).values()) == {0: 10, 1: 10, 2: 2}


def test_max_buckets_spreads_new_keys_over_existing_buckets(catalog: Catalog) -> None:
    table = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "10", "dynamic-bucket.max-buckets": "3"})
    write(table, batch(np.arange(100), 0))
    assert sorted(set(bucket_of_each_key(table).values())) == [0, 1, 2]
    assert read(table).num_rows == 100


def test_running_out_of_bucket_ids_is_a_clear_error(catalog: Catalog) -> None:
    table = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "1"})
    assigner = DynamicBucketAssigner(table.store, None)
    part = PartitionCodec(table.schema).from_values(("a",))
    idx = assigner.index(part.binary)
    idx.bucket_rows.update({b: 1 for b in range(32768)})  # every id taken, each bucket full
    with pytest.raises(LakehouseError, match="increase 'dynamic-bucket.target-row-num'"):
        assigner.assign(part, np.array([12345], np.int32))


def test_parallel_assigners_own_disjoint_keys_and_buckets(catalog: Catalog) -> None:
    table = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "100"})
    data = batch(np.arange(2_000), 0)
    hashes = hash_rows([data.column("id")], table.schema.types_of(["id"]))
    owner = assigner_of(hashes, 2)
    wb = table.new_batch_write_builder()
    writers = [wb.new_write(num_assigners=2, assigner_id=i) for i in range(2)]
    messages = []
    for i, w in enumerate(writers):
        w.write_arrow(data.filter(pa.array(owner == i)))
        messages += w.prepare_commit()
    wb.new_commit().commit(messages)
    buckets = bucket_of_each_key(table)
    assert len(buckets) == 2_000
    for key, bucket in buckets.items():
        assert bucket % 2 == owner[key]
    with pytest.raises(LakehouseError, match="another assigner"):
        wb2 = table.new_batch_write_builder()
        wb2.new_write(num_assigners=2, assigner_id=0).write_arrow(data.filter(pa.array(owner == 1)))


def test_two_writers_assigning_new_keys_at_once_cannot_duplicate_a_key(catalog: Catalog, tmp_path: Path) -> None:
    table = dynamic_table(catalog)
    write(table, batch(np.arange(100), 0))
    first, second = table.new_batch_write_builder(), table.new_batch_write_builder()
    w1, w2 = first.new_write(), second.new_write()
    w1.write_arrow(batch(np.arange(100, 200), 1))
    w2.write_arrow(batch(np.arange(150, 250), 2))  # 150..199 are new to both writers
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()
    first.new_commit().commit(m1)
    with pytest.raises(CommitConflictError, match="could duplicate keys"):
        second.new_commit().commit(m2)
    w2.abort(m2)
    keys = read(table).column("id").to_pylist()
    assert len(keys) == len(set(keys)) == 200


def test_updates_of_existing_keys_from_two_writers_do_not_conflict(catalog: Catalog) -> None:
    table = dynamic_table(catalog)
    write(table, batch(np.arange(100), 0))
    first, second = table.new_batch_write_builder(), table.new_batch_write_builder()
    w1, w2 = first.new_write(), second.new_write()
    w1.write_arrow(batch(np.arange(0, 50), 1))
    w2.write_arrow(batch(np.arange(50, 100), 2))
    first.new_commit().commit(w1.prepare_commit())
    second.new_commit().commit(w2.prepare_commit())
    assert sorted(read(table).column("v").to_pylist()) == [1] * 50 + [2] * 50


def test_overwrite_of_a_dynamic_partition_rebuilds_its_index(catalog: Catalog) -> None:
    table = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "10"})
    write(table, batch(np.arange(100), 0))
    write(table, batch(np.arange(5), 9), overwrite={"dt": "a"})
    assert read(table).num_rows == 5
    index = table.store.manifest_io().read_index_manifest(table.latest_snapshot().index_manifest)
    assert sum(e.row_count for e in index) == 5
    write(table, batch(np.arange(3, 8), 1))
    assert read(table).num_rows == 8


def paimon_assign(index: dict[int, int], hashes: list[int], target: int, num_assigners: int = 1,
                  assigner_id: int = 0) -> list[int]:
    """Paimon's HashBucketAssigner rule, one key at a time (the reference for the vectorised one):
    a known hash keeps its bucket, a new one takes the lowest of the assigner's non-full buckets,
    else the lowest free bucket id of the assigner."""
    out = []
    for h in hashes:
        if h not in index:
            rows = Counter(index.values())
            open_buckets = sorted(b for b in rows if b % num_assigners == assigner_id and rows[b] < target)
            if open_buckets:
                index[h] = open_buckets[0]
            else:
                index[h] = next(b for b in range(assigner_id, 32768, num_assigners) if b not in rows)
        out.append(index[h])
    return out


@pytest.mark.parametrize("num_assigners", [1, 3])
def test_batch_assignment_matches_paimons_key_by_key_rule(catalog: Catalog, num_assigners: int) -> None:
    table = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "7"})
    part = PartitionCodec(table.schema).from_values(("a",))
    rng = np.random.default_rng(11)
    pool = rng.integers(-2**31, 2**31 - 1, 300).astype(np.int32)
    pool = pool[assigner_of(pool, num_assigners) == 1 % num_assigners]
    assigner = DynamicBucketAssigner(table.store, None, num_assigners, 1 % num_assigners)
    expected_index: dict[int, int] = {}
    batches = [pool[:40],                                         # distinct new keys
               rng.choice(pool[:80], 120),                        # repeats, known and new keys mixed
               np.concatenate([pool[80:90], pool[80:90][::-1]]),  # each new key twice
               pool[:30]]                                         # known keys only
    for hashes in batches:
        before = dict(expected_index)
        want = paimon_assign(expected_index, hashes.tolist(), 7, num_assigners, 1 % num_assigners)
        assert assigner.assign(part, hashes).tolist() == want
        new = {h: b for h, b in expected_index.items() if h not in before}
        updated = {h: before[h] for h in hashes.tolist() if h in before}
        assert assigner.inserted == {(part.binary, b): n for b, n in Counter(new.values()).items()}
        assert assigner.updated == {(part.binary, b): n for b, n in Counter(updated.values()).items()}
        assigner.inserted.clear()
        assigner.updated.clear()
    index = assigner.index(part.binary)
    assert index.bucket_rows == dict(Counter(expected_index.values()))
    for bucket, hashes in index.hashes_by_bucket(index.bucket_rows).items():
        assert sorted(hashes.tolist()) == sorted(h for h, b in expected_index.items() if b == bucket)


def test_hash_index_regrows_with_keys_that_wrap_past_its_last_slot() -> None:
    rng = np.random.default_rng(5)
    # 1000 hashes in the top fifth of the uint32 range want the last fifth of the table: laid out
    # in key order when it regrows, they run past its end and wrap around to its first slots.
    top = np.unique(rng.integers(int(0.8 * 2**32), 2**32, 1_000).astype(np.uint32).view(np.int32))
    spread = np.setdiff1d(np.unique(rng.integers(-2**31, 2**31 - 1, 3_000).astype(np.int32)), top)
    idx = PartitionHashIndex(top[:100], (np.arange(100) % 9).astype(np.int16))
    size = idx.nbytes
    idx.add(top[100:], (np.arange(100, len(top)) % 9).astype(np.int16))  # regrow, wrapping
    assert idx.nbytes > size and (idx.lookup(top[:1]) >= 0).all()
    idx.add(spread[:50], np.full(50, 3, np.int16))                      # probing insert
    idx.add(spread[50:], np.full(len(spread) - 50, 4, np.int16))        # regrow again
    keys = np.concatenate([top, spread])
    buckets = np.concatenate([np.arange(len(top)) % 9, np.full(50, 3), np.full(len(spread) - 50, 4)])
    assert len(idx) == len(keys) and (idx.lookup(keys) == buckets).all()
    absent = np.setdiff1d(rng.integers(-2**31, 2**31 - 1, 5_000).astype(np.int32), keys)
    assert (idx.lookup(absent) == -1).all()
    by_bucket = idx.hashes_by_bucket(range(9))
    assert set(by_bucket) == set(range(9))
    for bucket, hashes in by_bucket.items():
        assert hashes.tolist() == idx.hashes_of(bucket).tolist()  # the slot order of hashes_of
        assert sorted(hashes.tolist()) == sorted(keys[buckets == bucket].tolist())


def test_a_batch_repeating_new_keys_gives_each_key_one_bucket(catalog: Catalog) -> None:
    table = dynamic_table(catalog, **{"dynamic-bucket.target-row-num": "100"})
    ids = np.random.default_rng(2).integers(0, 500, 2_000)
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": ids, "dt": ["a"] * len(ids), "v": np.arange(len(ids))}, schema=SCHEMA))
    messages = w.prepare_commit()
    c.commit(messages)
    distinct = len(np.unique(ids))
    counts = Counter(bucket_of_each_key(table).values())
    assert sum(counts.values()) == distinct and sorted(counts) == list(range(len(counts)))
    assert all(n == 100 for b, n in counts.items() if b < len(counts) - 1)  # filled in order
    assert sum(m.inserted_keys or 0 for m in messages) == distinct
    last = {int(i): int(v) for i, v in zip(ids, np.arange(len(ids)), strict=True)}
    assert {r["id"]: r["v"] for r in read(table).to_pylist()} == last


@pytest.mark.parametrize("keys", [5_000, 50_000, 300_000])
def test_hash_index_holds_at_most_about_twelve_bytes_a_key(keys: int) -> None:
    # Issue 30: the dynamic-bucket index stays at about 12 bytes a key (an int32 hash and an int16
    # bucket per slot, at a load of 0.5 to 0.75) however the keys arrive.
    rng = np.random.default_rng(keys)
    hashes = np.unique(rng.integers(-2**31, 2**31 - 1, keys).astype(np.int32))
    idx = PartitionHashIndex()
    for part in np.array_split(hashes, 7):
        idx.add(part, np.zeros(len(part), np.int16))
    assert len(idx) == len(hashes)
    assert 8 <= idx.nbytes / len(idx) <= 12.01


def test_keys_arriving_in_hash_order_are_indexed_without_probing_slot_by_slot() -> None:
    # Batches in hash order (as HASH index files list them): the first two fill one run of slots
    # to the table's end, and the third's home slots all fall in that run. Probing advanced one
    # slot a round over the whole batch: ~98,000 rounds, 15 s of CPU at 300,000 keys. An insert
    # now lays the table out anew after a few rounds (well under a second).
    rng = np.random.default_rng(300_000)
    hashes = np.unique(rng.integers(-2**31, 2**31 - 1, 300_000).astype(np.int32))
    idx = PartitionHashIndex()
    started = time.process_time()
    for bucket, part in enumerate(np.array_split(hashes, 7)):
        idx.add(part, np.full(len(part), bucket, np.int16))
    assert time.process_time() - started < 3.0
    assert len(idx) == len(hashes) and 8 <= idx.nbytes / len(idx) <= 12.01
    expected = np.repeat(np.arange(7), [len(p) for p in np.array_split(hashes, 7)])
    assert (idx.lookup(hashes) == expected).all()
    assert {b: len(h) for b, h in idx.hashes_by_bucket(range(7)).items()} == dict(enumerate(np.bincount(expected)))
