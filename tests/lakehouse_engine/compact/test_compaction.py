"""Compaction end to end: levels stay bounded, full compaction leaves one run, nothing is lost."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CommitConflictError, LakehouseError
from lakehouse_engine.compact.table_compact import plan_compaction, run_compact_task
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string())])


def batch(ids: list[int], v: int, kind: str = "+I") -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids), "rk": [kind] * len(ids)}, schema=SCHEMA)


def runs_per_bucket(table) -> dict[tuple[str, int], int]:
    stats = table.bucket_stats()
    return {(p, b): r for p, b, r in zip(stats.column("partition").to_pylist(), stats.column("bucket").to_pylist(),
                                         stats.column("sorted_runs").to_pylist(), strict=True)}


def test_hundred_small_commits_never_exceed_the_stop_trigger(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "rk"})
    stop_trigger = table.options.stop_trigger
    model: dict[int, int] = {}
    for i in range(100):
        ids = list(range(i * 7 % 50, i * 7 % 50 + 20))
        write(table, batch(ids, i))
        model.update({k: i for k in ids})
        assert max(runs_per_bucket(table).values()) <= stop_trigger
    kinds = [s.commit_kind for s in table.snapshots()]
    assert "COMPACT" in kinds
    assert {r["id"]: r["v"] for r in read(table).to_pylist()} == model


def test_full_compaction_leaves_one_sorted_run_and_drops_deletes(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "2", "rowkind.field": "rk", "write-only": "true"})
    for i in range(6):
        write(table, batch(list(range(i, i + 30)), i))
    write(table, batch([0, 1, 2], 99, "-D"))
    assert max(runs_per_bucket(table).values()) > 1
    before = rows(read(table), "id")
    ids = table.compact(full=True)
    assert len(ids) == 1 and table.latest_snapshot().commit_kind == "COMPACT"
    assert set(runs_per_bucket(table).values()) == {1}
    entries = table.store.manifest_io().live_entries(table.latest_snapshot())
    assert {e.file.level for e in entries} == {table.options.num_levels - 1}
    assert all(e.file.delete_row_count == 0 for e in entries)
    assert sum(e.file.row_count for e in entries) == len(before)
    assert rows(read(table), "id") == before
    splits = table.new_read_builder().new_scan().plan().splits()
    assert all(s.raw_convertible for s in splits)
    assert table.compact(full=True) == []  # nothing left to do


def test_compaction_is_a_noop_below_the_trigger(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "write-only": "true"})
    write(table, batch([1, 2], 0))
    write(table, batch([2, 3], 1))
    assert table.compact() == []
    assert len(table.compact(full=True)) == 1


def test_large_lone_files_are_upgraded_not_rewritten(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "write-only": "true", "compaction.file-size": "1 b"})
    write(table, batch(list(range(0, 100)), 0))
    write(table, batch(list(range(200, 300)), 1))  # no key overlap: two lone sections
    before = {e.file.file_name for e in table.store.manifest_io().live_entries(table.latest_snapshot())}
    table.compact(full=True)
    after = table.store.manifest_io().live_entries(table.latest_snapshot())
    assert {e.file.file_name for e in after} == before  # same physical files, new level
    assert {e.file.level for e in after} == {table.options.num_levels - 1}


def test_small_lone_files_are_rewritten_together(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "write-only": "true"})
    write(table, batch(list(range(0, 100)), 0))
    write(table, batch(list(range(200, 300)), 1))
    table.compact(full=True)
    after = table.store.manifest_io().live_entries(table.latest_snapshot())
    assert len(after) == 1 and after[0].file.row_count == 200 and after[0].file.file_source == 1


def test_a_compaction_that_lost_the_race_fails_cleanly_and_loses_nothing(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", "write-only": "true"})
    for i in range(3):
        write(table, batch(list(range(i, i + 10)), i))
    tasks = plan_compaction(table.store, full=True)
    stale = [run_compact_task(table.store, t) for t in tasks]
    table.compact(full=True)                      # another compaction gets there first
    write(table, batch([500], 7))                 # and an append lands after it
    expected = rows(read(table), "id")
    files_before = {p.name for p in Path(table.path).rglob("*.parquet")}
    with pytest.raises(CommitConflictError, match="no longer live"):
        table.new_batch_write_builder().new_commit().commit([m for m in stale if m is not None])
    files_after = {p.name for p in Path(table.path).rglob("*.parquet")}
    assert files_after <= files_before  # its own new files were deleted
    assert rows(read(table), "id") == expected


def test_bucket_stats_reads_manifests_only(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                        pa.field("v", pa.int64())])
    table = create_table(catalog, "s", schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "2", "write-only": "true"})
    for i in range(3):
        write(table, pa.table({"id": list(range(10)), "dt": ["a"] * 5 + ["b"] * 5, "v": [i] * 10}, schema=schema))
    stats = table.bucket_stats()
    assert set(stats.column_names) >= {"partition", "bucket", "total_buckets", "record_count", "file_count",
                                       "sorted_runs", "max_level", "size_bytes"}
    assert sum(stats.column("record_count").to_pylist()) == 30
    assert set(stats.column("partition").to_pylist()) == {"dt=a", "dt=b"}
    assert all(r == f for r, f in zip(stats.column("sorted_runs").to_pylist(), stats.column("file_count").to_pylist(), strict=True))
    table.compact(full=True)
    assert set(table.bucket_stats().column("sorted_runs").to_pylist()) == {1}
    assert table.bucket_stats(snapshot_id=1).num_rows >= 2


def test_append_table_compaction_merges_small_files_oldest_first(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = create_table(catalog, "log", schema, options={"compaction.min.file-num": "3"})
    for i in range(6):
        write(table, pa.table({"id": [i], "v": [f"r{i}"]}, schema=schema))
    assert table.bucket_stats().column("file_count").to_pylist() == [6]
    assert table.compact() == []  # no window reaches target-file-size yet, max-file-num is 50
    table.compact(full=True)
    assert table.bucket_stats().column("file_count").to_pylist() == [1]
    assert sorted(read(table).column("id").to_pylist()) == list(range(6))
    capped = create_table(catalog, "log2", schema, options={"compaction.max.file-num": "4"})
    for i in range(6):
        write(capped, pa.table({"id": [i], "v": [f"r{i}"]}, schema=schema))
    capped.compact()
    assert capped.bucket_stats().column("file_count").to_pylist() == [3]  # oldest 4 merged into 1


def test_two_compactions_writing_overlapping_files_into_one_level_conflict(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "write-only": "true", "compaction.file-size": "1 b"})
    write(table, batch(list(range(0, 50)), 0))
    write(table, batch(list(range(25, 75)), 1))
    tasks = plan_compaction(table.store, full=True)
    first = [run_compact_task(table.store, t) for t in tasks]
    table.new_batch_write_builder().new_commit().commit([m for m in first if m is not None])
    # A second full compaction of the new state is fine; a stale one would delete gone files.
    write(table, batch(list(range(60, 80)), 2))
    (task,) = plan_compaction(table.store, full=True)
    message = run_compact_task(table.store, task)
    assert message is not None
    # Forge a concurrent compaction's file: another file, same key range, same top level.
    top = [f for f in message.compact_after if f.level == table.options.num_levels - 1]
    overlapping = dataclasses.replace(top[0], file_name="data-forged-0.parquet")
    forged = type(message)(message.partition, message.bucket, message.total_buckets,
                           compact_after=[overlapping])
    with pytest.raises(CommitConflictError, match="would overlap at level"):
        table.new_batch_write_builder().new_commit().commit([message, forged])


@pytest.mark.parametrize("options,primary_keys", [({"bucket": "1"}, ["id"]), ({"bucket": "-1"}, []),
                                                  ({"bucket": "-2"}, ["id"])])
def test_compacting_a_partition_by_a_field_that_is_no_partition_key_is_refused(
        catalog: Catalog, options: dict[str, str], primary_keys: list[str]) -> None:
    # Fixed, append and postpone tables alike, empty or not: the mistake is named before any work.
    table = create_table(catalog, f"t{options['bucket']}", SCHEMA, primary_keys=primary_keys, options=options)
    for _ in range(2):
        with pytest.raises(LakehouseError, match=r"compact: \['dt'\] are not partition keys of table"):
            table.compact(partitions=[{"dt": "2026-11-21"}])
        write(table, batch([1, 2], 1))
