"""A stream writer (one TableWrite kept across commits) takes a bucket's levels from the latest
snapshot at the start of a commit cycle when they are no longer the table's: after its compaction
at commit lost to a dedicated compaction (whose outputs the committer removed), after a dedicated
compaction replaced files (which expiry then removes), for every merge engine whose writer looks
keys up or compacts. It never reads a missing file, loses no row, and its changes replay to the
table. While its last commit is still in flight, its levels keep that commit's files."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, CommitConflictError
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_cycles import CommitCycles, levels_stale
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, replay

ENGINES: dict[str, dict[str, str]] = {
    "deduplicate-lookup": {"changelog-producer": "lookup"},
    "partial-update-lookup": {"merge-engine": "partial-update", "changelog-producer": "lookup"},
    "aggregation-lookup": {"merge-engine": "aggregation", "fields.v.aggregate-function": "last_non_null_value",
                           "changelog-producer": "lookup"},
    "first-row-lookup": {"merge-engine": "first-row", "changelog-producer": "lookup", "ignore-delete": "true"},
    "first-row": {"merge-engine": "first-row", "ignore-delete": "true"},
    "deletion-vectors-lookup": {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
    "deduplicate-compacting": {"changelog-producer": "input"},
    "full-compaction": {"changelog-producer": "full-compaction"},
}
#: (A write-only writer compacts nothing: its levels are never read, its level 0 goes up elsewhere.)
WRITERS = {**ENGINES, "write-only-lookup": {"changelog-producer": "lookup", "write-only": "true"}}


def _table(catalog: Catalog, engine: str, **options: str) -> FileStoreTable:
    return create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "num-sorted-run.compaction-trigger": "2", **WRITERS[engine], **options})


def _rows(keys: range | list[int], v: str) -> pa.Table:
    keys = list(keys)
    return pa.table({"id": keys, "v": [v] * len(keys), "k": ["+I"] * len(keys)}, schema=SCHEMA)


def _expected(engine: str, writes: list[tuple[range | list[int], str]]) -> dict[int, str]:
    rows: dict[int, str] = {}
    for keys, v in writes:
        for k in keys:
            if engine.startswith("first-row"):
                rows.setdefault(k, v)
            else:
                rows[k] = v
    return rows


def _other_writer(t: FileStoreTable, keys: list[int], v: str) -> None:
    """Another (write-only) writer's commit: a level-0 file for the dedicated compaction to merge."""
    wb = t.copy({"write-only": "true"}).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(_rows(keys, v))
    wb.new_commit().commit(w.prepare_commit())
    w.close()


def _table_rows(t: FileStoreTable) -> dict[int, Any]:
    return {r["id"]: r["v"] for r in read(t).to_pylist()}


def _check_changes(t: FileStoreTable, engine: str) -> None:
    if WRITERS[engine].get("write-only"):
        t.compact()  # (its level 0 up, with its changelog)
    if WRITERS[engine].get("changelog-producer") in ("lookup", "input"):
        assert replay(change_tuples(t)) == _table_rows(t)
    elif WRITERS[engine].get("changelog-producer") == "full-compaction":
        t.compact(full=True)
        assert replay(change_tuples(t)) == _table_rows(t)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_writer_whose_compaction_lost_to_a_dedicated_one_writes_on(catalog: Catalog, engine: str,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    t = _table(catalog, engine, **{"full-compaction.delta-commits": "1"})  # (its compaction rewrites the top)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    # (Keys the other writer's do not share: a `lookup` changelog of keys the dedicated compaction
    # rewrote would be stale, and the whole commit conflict, test_changelog_lost_compaction.)
    writes: list[tuple[range | list[int], str]] = [(range(0, 20, 2), "a"), (range(1, 10, 2), "b")]
    w.write_arrow(_rows(*writes[0]))
    c.commit(w.prepare_commit(1), 1)
    w.write_arrow(_rows(*writes[1]))
    messages = w.prepare_commit(2)
    assert any(m.compact_before for m in messages)  # (its compaction at commit)
    writes.append(([30], "x"))
    _other_writer(t, [30], "x")
    t.compact(full=True)  # a dedicated compaction of the same files lands first
    with caplog.at_level(logging.WARNING):
        kinds = [t.snapshot(s).commit_kind for s in c.commit(messages, 2)]
    assert kinds[0] == "APPEND"
    assert "lost to a concurrent change" in caplog.text
    for i, (keys, v) in enumerate([([0, 7, 12, 20], "c"), ([1, 12, 21], "d")], start=3):
        writes.append((keys, v))
        w.write_arrow(_rows(keys, v))
        c.commit(w.prepare_commit(i), i)
    w.close()
    assert _table_rows(t) == _expected(engine, writes)
    _check_changes(t, engine)


@pytest.mark.parametrize("engine", list(WRITERS))
def test_a_writer_whose_files_a_dedicated_compaction_replaced_and_expiry_removed_writes_on(
        catalog: Catalog, engine: str) -> None:
    t = _table(catalog, engine)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    writes: list[tuple[range | list[int], str]] = [(range(0, 10), "a"), (range(5, 15), "b")]
    for i, (keys, v) in enumerate(writes, start=1):
        w.write_arrow(_rows(keys, v))
        c.commit(w.prepare_commit(i), i)
    writes.append(([30], "x"))
    _other_writer(t, [30], "x")
    t.compact(full=True)
    t.expire_snapshots(retain_max=1, retain_min=1)  # the files the compaction replaced are deleted
    for i, (keys, v) in enumerate([([0, 7, 12, 20], "c"), ([1, 12, 21], "d")], start=3):
        writes.append((keys, v))
        w.write_arrow(_rows(keys, v))
        c.commit(w.prepare_commit(i), i)
    w.close()
    assert _table_rows(t) == _expected(engine, writes)


def test_a_writer_whose_last_commit_is_in_flight_keeps_its_files_in_its_levels(
        catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    """Paimon's Flink writer goes on writing while the checkpoint's commit is pending: the levels
    keep the prepared commit's files (no snapshot lists them yet); its lookup sees their rows, and
    its compaction at commit lands. (Had it dropped them, that compaction would lose, and the
    committer's would give the changelog.)"""
    t = _table(catalog, "deduplicate-lookup", **{"write-buffer-size": "1 kb"})
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(range(0, 60), "a"))
    first = w.prepare_commit(1)
    w.write_arrow(_rows(range(0, 60), "b"))  # (over the buffer: flushed, looked up, before commit 1)
    with caplog.at_level(logging.WARNING):
        c.commit(first, 1)
        kinds = [t.snapshot(s).commit_kind for s in c.commit(w.prepare_commit(2), 2)]
    assert kinds == ["APPEND", "COMPACT"] and "lost" not in caplog.text
    assert _table_rows(t) == {k: "b" for k in range(60)}
    changes = change_tuples(t)
    assert [ch[1:] for ch in changes if ch[2] == 0] == [("+I", 0, "a"), ("-U", 0, "a"), ("+U", 0, "b")]
    assert replay(changes) == _table_rows(t)


def test_commit_cycles_settle_when_the_commit_lands(catalog: Catalog) -> None:
    t = _table(catalog, "deduplicate-lookup")
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    cycles = CommitCycles(t.store, wb.commit_user)
    assert cycles.settled_by() == 0 and cycles.count == 0
    w.write_arrow(_rows(range(0, 4), "a"))
    messages = w.prepare_commit(1)
    cycles.prepared(1, handed_out=True)
    assert cycles.count == 1 and cycles.settled_by() is None  # in flight
    c.commit(messages, 1)
    assert cycles.settled_by() == t.latest_snapshot().id
    cycles.prepared(2, handed_out=False)  # nothing handed out: nothing in flight
    assert cycles.count == 2 and cycles.settled_by() is not None


def test_levels_are_stale_when_a_file_or_its_level_differs() -> None:
    from lakehouse_engine.format.manifest_entries import DataFileMeta

    def f(name: str, level: int) -> DataFileMeta:
        stats: Any = None
        return DataFileMeta(file_name=name, file_size=1, row_count=1, min_key=b"", max_key=b"", key_stats=stats,
                            value_stats=stats, min_sequence_number=0, max_sequence_number=0, schema_id=0,
                            level=level)

    assert levels_stale([f("a", 0), f("b", 5)], [f("b", 5), f("a", 0)]) == (False, [])
    assert levels_stale([f("a", 5)], [f("a", 0)]) == (True, [f("a", 5)])
    assert levels_stale([f("a", 0)], [f("a", 0), f("c", 5)]) == (True, [])


# ---- property: a stream writer amid dedicated compactions, other writers and expiry -------------
step = st.one_of(
    st.tuples(st.just("write"), st.lists(st.tuples(st.integers(0, 15), st.integers(0, 9)), min_size=1, max_size=30)),
    st.tuples(st.just("commit"), st.none()),
    st.tuples(st.just("compact"), st.sampled_from(["minor", "full", "level0"])),
    st.tuples(st.just("other"), st.lists(st.tuples(st.integers(0, 15), st.integers(0, 9)), min_size=1, max_size=5)),
    st.tuples(st.just("expire"), st.none()),
)
PROPERTY_ENGINES = {
    "deduplicate-lookup": {"changelog-producer": "lookup"},
    "first-row-lookup": {"merge-engine": "first-row", "changelog-producer": "lookup", "ignore-delete": "true"},
    "deletion-vectors-lookup": {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
    "deduplicate-compacting": {"changelog-producer": "input", "num-sorted-run.stop-trigger": "2"},
}


def _run_script(catalog: Catalog, engine: str, script: list[tuple[str, Any]], n: int) -> None:
    t = create_table(catalog, f"t{n}", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "write-buffer-size": "1 kb", "num-sorted-run.compaction-trigger": "2",
        # (Expiry keeps the changelog: the changes stay readable from the start.)
        "changelog.num-retained.min": "1000", "changelog.num-retained.max": "1000", **PROPERTY_ENGINES[engine]})
    first_row = engine.startswith("first-row")
    rows: dict[int, str] = {}

    def land(batch: list[tuple[int, str]]) -> None:
        for k, v in batch:
            if not (first_row and k in rows):
                rows[k] = v

    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    pending: list[tuple[int, str]] = []
    for i, (kind, arg) in enumerate(script):
        if kind in ("write", "commit"):
            try:
                if kind == "write":
                    batch = [(k, f"w{i}.{v}") for k, v in arg]
                    pending += batch
                    w.write_arrow(pa.table({"id": [k for k, _ in batch], "v": [v for _, v in batch],
                                            "k": ["+I"] * len(batch)}, schema=SCHEMA))
                    continue
                messages = w.prepare_commit(i)
            except CommitConflictError:
                # (A first-row writer that cannot take its levels from the table again: its
                # cycle's rows are written again by no one, the writer starts over.)
                w.abort()
                w, c, pending = wb.new_write(), wb.new_commit(), []
                continue
            try:
                c.commit(messages, i)
            except CommitConflictError:
                w.abort(messages)  # (the writer's rows of the cycle are written again by no one)
            else:
                land(pending)
            pending = []
        elif kind == "compact":
            t.compact(full=arg == "full", level0_only=arg == "level0")
        elif kind == "other":
            batch = [(k, f"o{i}.{v}") for k, v in arg]
            owb = t.new_batch_write_builder()
            ow = owb.new_write()
            ow.write_arrow(pa.table({"id": [k for k, _ in batch], "v": [v for _, v in batch],
                                     "k": ["+I"] * len(batch)}, schema=SCHEMA))
            owb.new_commit().commit(ow.prepare_commit())
            ow.close()
            land(batch)
        else:
            t.expire_snapshots(retain_max=1, retain_min=1)
    w.close()
    assert _table_rows(t) == rows
    t.compact(full=True)  # (level 0 up: its changelog too)
    assert replay(change_tuples(t)) == rows


@pytest.mark.parametrize("later_cycle", [False, True])
def test_a_dv_stream_writer_looks_up_the_bucket_as_its_flush_finds_it(catalog: Catalog, later_cycle: bool) -> None:
    """A DV writer's cycle (its first, or a later one's new bucket writer): between the bucket's
    first write and its flush, another writer's compaction at commit replaced the bucket's file and
    expiry removed it; the flush lookup reads the bucket (files and vectors) as the latest snapshot
    holds it, not as the write found it (it read the removed file before: DataFileMissingError;
    found by the property below)."""
    _run_script(catalog, "deletion-vectors-lookup", [("commit", None)] * later_cycle + [
        ("other", [(0, 0), (2, 0), (3, 0), (4, 0)]), ("other", [(5, 0)]), ("compact", "full"),
        ("write", [(0, 0)]), ("other", [(1, 0)]), ("expire", None), ("commit", None)], 0)


@pytest.mark.parametrize("engine", list(PROPERTY_ENGINES))
def test_a_stream_writer_amid_compactions_other_writers_and_expiry_keeps_every_row(
        catalog: Catalog, engine: str) -> None:
    """Random scripts: whatever the table does between and inside the stream writer's cycles, it
    reads no removed file; each of its commits lands or conflicts; the table holds every landed
    row and its changes replay to it."""
    count = iter(range(10**6))

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
    @given(script=st.lists(step, min_size=1, max_size=14))
    def check(script: list[tuple[str, Any]]) -> None:
        _run_script(catalog, engine, script + [("commit", None)], next(count))

    check()
