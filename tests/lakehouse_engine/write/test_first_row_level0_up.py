"""A first-row table's level 0 goes up at every commit without the keys already above it (Paimon's
first-row lookup compaction), so a key never sits in two files above level 0: Paimon reads those
files raw. Checked on the file metadata and contents, for every path that writes such a table."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, CommitConflictError, Schema
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def upper_files(table: FileStoreTable) -> dict[tuple[bytes, int], list[tuple[int, str, list[Any]]]]:
    """Per (partition, bucket): each live file above level 0 as (level, name, its keys)."""
    store = table.store
    latest = store.snapshot_manager().latest_snapshot()
    out: dict[tuple[bytes, int], list[tuple[int, str, list[Any]]]] = {}
    if latest is None:
        return out
    codec = store.partition_codec()
    keys = store.schema.trimmed_primary_keys
    for e in store.manifest_io().live_entries(latest):
        if e.file.level == 0 or e.bucket < 0:
            continue
        path = f"{store.path_factory.bucket_dir(codec.from_binary(e.partition).spec, e.bucket)}/{e.file.file_name}"
        t = pq.read_table(path, columns=keys)
        out.setdefault((e.partition, e.bucket), []).append(
            (e.file.level, e.file.file_name, list(zip(*(t.column(k).to_pylist() for k in keys), strict=True))))
    return out


def assert_one_file_per_key_above_level0(table: FileStoreTable) -> None:
    """No key of a bucket in two of its files above level 0 (nor twice in one)."""
    for (partition, bucket), files in upper_files(table).items():
        seen = Counter(k for _, _, ks in files for k in ks)
        twice = [k for k, n in seen.items() if n > 1]
        assert not twice, f"bucket {bucket} of {partition!r}: keys {twice[:5]} above level 0 twice: {files}"


def level0_files(table: FileStoreTable) -> list[str]:
    store = table.store
    latest = store.snapshot_manager().latest_snapshot()
    if latest is None:
        return []
    return [e.file.file_name for e in store.manifest_io().live_entries(latest)
            if e.file.level == 0 and e.bucket >= 0]


def _batch(ids: Any, tag: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def _ours(table: FileStoreTable) -> list[tuple[int, str]]:
    t = read(table)
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_each_commit_takes_level0_up_without_the_keys_already_above(catalog: Catalog, producer: str) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "merge-engine": "first-row", "changelog-producer": producer})
    write(t, _batch(range(0, 10), "a"))
    write(t, _batch(range(5, 15), "b"))
    write(t, _batch(range(12, 20), "c"))
    assert level0_files(t) == []
    assert_one_file_per_key_above_level0(t)
    (files,) = upper_files(t).values()
    assert sorted(k for _, _, ks in files for (k,) in ks) == list(range(20))
    expected = [(i, "a" if i < 10 else "b" if i < 15 else "c") for i in range(20)]
    assert _ours(t) == [(i, f"{tag}{i}") for i, tag in expected]


def test_the_rows_a_compaction_into_a_lower_level_drops_are_the_later_ones(catalog: Catalog) -> None:
    # Five levels of runs: the second commit's level 0 goes to the level below the oldest run
    # (not the top), where Paimon's lookup finds the keys above and drops them.
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "merge-engine": "first-row", "num-sorted-run.compaction-trigger": "10"})
    write(t, _batch(range(0, 1000), "a"))
    write(t, _batch(range(990, 1010), "b"))
    levels = sorted({lvl for fs in upper_files(t).values() for lvl, _, _ in fs})
    assert len(levels) == 2, levels  # the small run landed below the large one
    assert_one_file_per_key_above_level0(t)
    assert _ours(t) == sorted([(i, f"a{i}") for i in range(1000)] + [(i, f"b{i}") for i in range(1000, 1010)])


def test_the_lookup_changelog_of_a_first_row_commit_lists_only_new_keys(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "merge-engine": "first-row", "changelog-producer": "lookup"})
    write(t, _batch(range(0, 5), "a"))
    write(t, _batch(range(3, 8), "b"))
    rb = t.new_stream_read_builder().with_include_row_kind()
    scan, reader = rb.new_streaming_scan(), rb.new_read()
    first = reader.to_arrow(scan.plan().splits())  # the full first plan: every row
    assert sorted(first.column("id").to_pylist()) == list(range(8))
    before = len(t.snapshots())
    write(t, _batch(range(6, 10), "c"))
    follow = []
    for _ in range(len(t.snapshots()) - before):
        follow += reader.to_arrow(scan.plan().splits()).to_pylist()
    assert sorted((r["_row_kind"], r["id"], r["v"]) for r in follow) == [("+I", 8, "c8"), ("+I", 9, "c9")]
    assert level0_files(t) == []
    assert_one_file_per_key_above_level0(t)


def test_a_first_row_overwrite_takes_its_own_level0_up(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "2", "merge-engine": "first-row"})
    write(t, _batch(range(0, 10), "a"))
    write(t, pa.concat_tables([_batch(range(5, 15), "b"), _batch(range(5, 8), "c")]), overwrite={})
    assert level0_files(t) == []
    assert_one_file_per_key_above_level0(t)
    assert _ours(t) == [(i, f"b{i}") for i in range(5, 15)]


def test_a_write_only_first_row_table_keeps_level0_until_a_compaction_which_keeps_keys_unique(
        catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "merge-engine": "first-row", "write-only": "true"})
    write(t, _batch(range(0, 10), "a"))
    t.compact(full=True)
    write(t, _batch(range(5, 15), "b"))
    assert level0_files(t)
    t.compact()
    assert level0_files(t) == []
    assert_one_file_per_key_above_level0(t)
    assert _ours(t) == sorted([(i, f"a{i}") for i in range(10)] + [(i, f"b{i}") for i in range(10, 15)])


# ---- the invariant over random interleavings of writers, compactions and bucket modes ----------
PSCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.int64(), nullable=False),
                     pa.field("v", pa.int64())])
WRITERS = 3
keys = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 1)), min_size=1, max_size=12)
actions = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, WRITERS - 1), keys),
    st.tuples(st.just("commit"), st.integers(0, WRITERS - 1), st.just(None)),
    st.tuples(st.just("compact"), st.booleans(), st.just(None)),
), min_size=1, max_size=20)

MODES: dict[str, tuple[dict[str, str], list[str], list[str]]] = {
    # (options, primary key, partition keys); the low trigger makes writers compact mid-write too.
    "fixed": ({"bucket": "2", "num-sorted-run.compaction-trigger": "2"}, ["id"], []),
    "fixed_lookup": ({"bucket": "2", "changelog-producer": "lookup", "num-sorted-run.compaction-trigger": "2",
                      "num-sorted-run.stop-trigger": "3"},
                     ["id"], []),
    "dynamic": ({"bucket": "-1", "dynamic-bucket.target-row-num": "8"}, ["id", "p"], ["p"]),
    # One writer at a time: two writers of one new key in two partitions both keep it (the global
    # index race, on every merge engine; not the first-row lookup's).
    "cross_partition": ({"bucket": "-1", "dynamic-bucket.target-row-num": "8"}, ["id"], ["p"]),
    "postpone": ({"bucket": "-2", "postpone.default-bucket-num": "2"}, ["id"], []),
    # Level 0 waits for the dedicated compaction, which takes it up the same way.
    "write_only": ({"bucket": "2", "write-only": "true"}, ["id"], []),
}


def _run(mode: str, script: list[tuple[str, Any, Any]]) -> None:
    options, pk, parts = MODES[mode]
    warehouse = tempfile.mkdtemp(prefix="first-row-")
    try:
        catalog = Catalog(warehouse)
        catalog.create_database("db")
        catalog.create_table("db.t", Schema.from_pyarrow_schema(
            PSCHEMA, primary_keys=pk, partition_keys=parts, options={"merge-engine": "first-row", **options}))
        table = catalog.get_table("db.t")
        model: dict[tuple[int, ...], int] = {}
        value = 0
        open_writers: dict[int, tuple[Any, Any, list[tuple[int, int, int]]]] = {}
        for action, arg, batch in script:
            if mode == "cross_partition" and action != "compact":
                arg = 0
            if action == "write":
                if arg not in open_writers:
                    wb = table.new_batch_write_builder()
                    open_writers[arg] = (wb.new_write(), wb.new_commit(), [])
                w, _, pending = open_writers[arg]
                rows = [(k, p, value + i) for i, (k, p) in enumerate(batch)]
                value += len(rows)
                w.write_arrow(pa.table({"id": [r[0] for r in rows], "p": [r[1] for r in rows],
                                        "v": [r[2] for r in rows]}, schema=PSCHEMA))
                pending.extend(rows)
            elif action == "commit" and arg in open_writers:
                w, c, pending = open_writers.pop(arg)
                messages = w.prepare_commit()
                try:
                    c.commit(messages)
                except CommitConflictError:
                    c.abort(messages)  # another writer assigned or looked up the same keys first
                    continue
                for k, p, v in pending:  # acknowledged, in snapshot order: the first row stays
                    key = (k, p) if "p" in pk else (k,)
                    model.setdefault(key, v)
            elif action == "compact":
                table.compact(full=bool(arg))
            assert_one_file_per_key_above_level0(table)
            if mode not in ("postpone", "write_only"):  # every commit leaves level 0 empty, concurrent ones too
                assert level0_files(table) == []
        if options["bucket"] == "-2" or mode == "write_only":
            table.compact()  # postponed rows move into buckets, level 0 goes up
            assert_one_file_per_key_above_level0(table)
            assert level0_files(table) == []
        t = read(table)
        got = {((k, p) if "p" in pk else (k,)): v for k, p, v in zip(
            t.column("id").to_pylist(), t.column("p").to_pylist(), t.column("v").to_pylist(), strict=True)}
        assert t.num_rows == len(got)
        assert got == model
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


@pytest.mark.parametrize("mode", list(MODES))
def test_no_key_is_in_two_files_above_level0_in_any_interleaving(mode: str) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(script=actions)
    def check(script: list[tuple[str, Any, Any]]) -> None:
        _run(mode, script)

    check()


def test_a_writer_that_restored_before_another_commit_does_not_take_a_key_up_twice() -> None:
    # Writer 0 numbers its rows from an old snapshot; writer 2 commits other keys; writer 1 starts
    # after that. Writer 0 commits key 7 (taken up); writer 1 then commits key 7 too, with numbers
    # above writer 0's, so no re-sequencing happens: its compaction (which looked key 7 up in a
    # snapshot without it) must not take key 7 up a second time.
    _run("fixed", [("write", 0, [(1, 0)]), ("write", 2, [(30, 0), (31, 0), (32, 0), (33, 0)]), ("commit", 2, None),
                   ("write", 1, [(7, 0)]), ("write", 0, [(7, 0)]), ("commit", 0, None), ("commit", 1, None)])


def test_string_keys_already_above_are_dropped_from_a_lower_level(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("k", pa.string(), nullable=False), pa.field("v", pa.int64())])
    t = create_table(catalog, "s", schema, ["k"], options={"bucket": "1", "merge-engine": "first-row"})
    write(t, pa.table({"k": [f"key-{i:05d}" for i in range(2000)], "v": [0] * 2000}, schema=schema))
    write(t, pa.table({"k": [f"key-{i:05d}" for i in range(1990, 2010)], "v": [1] * 20}, schema=schema))
    assert level0_files(t) == []
    assert len({lvl for fs in upper_files(t).values() for lvl, _, _ in fs}) == 2
    assert_one_file_per_key_above_level0(t)
    got = read(t)
    assert sorted(zip(got.column("k").to_pylist(), got.column("v").to_pylist(), strict=True)) == \
        [(f"key-{i:05d}", 0 if i < 2000 else 1) for i in range(2010)]


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_a_rescale_of_a_first_row_table_takes_level0_up(catalog: Catalog, producer: str) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "2", "merge-engine": "first-row", "changelog-producer": producer})
    write(t, _batch(range(0, 10), "a"))
    write(t, _batch(range(5, 15), "b"))
    t.rescale(3)
    t = catalog.get_table("db.t")
    assert level0_files(t) == []
    assert_one_file_per_key_above_level0(t)
    assert _ours(t) == sorted([(i, f"a{i}") for i in range(10)] + [(i, f"b{i}") for i in range(10, 15)])


def test_postpone_compaction_of_a_first_row_table_keeps_the_rows_already_above(catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "-2", "merge-engine": "first-row"})
    write(t, _batch(range(0, 10), "a"))
    t.compact_postpone()
    write(t, _batch(range(5, 15), "b"))
    t.compact_postpone()
    assert level0_files(t) == []
    assert_one_file_per_key_above_level0(t)
    assert _ours(t) == sorted([(i, f"a{i}") for i in range(10)] + [(i, f"b{i}") for i in range(10, 15)])
