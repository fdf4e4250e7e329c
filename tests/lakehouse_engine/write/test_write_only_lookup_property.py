"""Property: a `lookup` table written by `write-only` writers, normal writers and `table.compact()`
in any order hands a stream reader exactly what changed, in Paimon's model: a level-0 file has not
given its changelog yet, the compaction that takes it up gives it (a write-only writer gives none).
The changes read in snapshot order, replayed strictly on an empty table (a `+I` only for an absent
key, a `-U`/`-D` only of the key's current row, each `+U` after its `-U`), give after every step
the table above level 0 (what Paimon's first stream plan reads; the whole table once a compaction
took level 0 up): no change is missing, none is given twice (a consumer summing them, like
`daily_revenue`, would count it twice). Each step gives as many changes per key as Paimon's
compaction would (LookupChangelogMergeFunctionWrapper: one per key whose level-0 records it takes
up, however many commits wrote them). And a stream started after any step (its first plan, then
the changes) ends at the table after a last compaction."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import kinds_keys_values, strict_replay

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("w", pa.int64()), pa.field("rk", pa.string())])

rows = st.lists(st.tuples(st.integers(0, 4), st.one_of(st.none(), st.integers(0, 99)),
                          st.sampled_from(["+I", "+I", "-D"])), min_size=1, max_size=5)
steps = st.lists(st.one_of(
    st.tuples(st.just("write-only"), rows),
    st.tuples(st.just("write"), rows),
    st.tuples(st.just("compact"), st.booleans()),
), min_size=1, max_size=10)

ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                    "fields.w.aggregate-function": "sum", "aggregation.remove-record-on-delete": "true"},
    # A -D of a key it had not seen retracts from what comes after (the read shows the sum of the
    # rest minus it); the changes say the same, write-only or not.
    "aggregation, retracting": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                                "fields.w.aggregate-function": "sum"},
    # `+I` of new keys only; its writers take level 0 up through the first-row lookup.
    "first-row": {"merge-engine": "first-row", "ignore-delete": "true"},
    # A write-only writer's level 0 is invisible until a compaction takes it up with its changelog.
    "deletion-vectors": {"deletion-vectors.enabled": "true"},
    "deletion-vectors, partial-update": {"deletion-vectors.enabled": "true", "merge-engine": "partial-update",
                                         "partial-update.remove-record-on-delete": "true"},
}


def _above_level0(table: FileStoreTable) -> dict[int, tuple[Any, Any]]:
    """The latest snapshot's rows above level 0: what the changelog has given so far."""
    scan = TableScan(table.store, None, None)
    scan.entry_filter = lambda e: e.file.level > 0
    rows = table.new_read_builder().new_read().to_arrow(scan.plan().splits())
    return {r["id"]: (r["v"], r["w"]) for r in rows.to_pylist()}


def _level0_keys(table: FileStoreTable) -> dict[str, set[int]]:
    """The latest snapshot's level-0 files, each with the keys of its records (retractions too)."""
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return {}
    store = table.store
    reader = store.file_reader()
    schema = pa.schema([SCHEMA.field("id")])
    files: dict[str, set[int]] = {}
    for e in TableScan(store, None, None).live_entries(snapshot):
        if e.file.level == 0:
            bucket_dir = store.path_factory.bucket_dir(store.partition_codec().from_binary(e.partition).spec, e.bucket)
            ids = reader.read(f"{bucket_dir}/{e.file.file_name}", ["id"], schema, e.file).column("id")
            files[e.file.file_name] = set(ids.to_pylist())
    return files


def _changes_per_key(changes: pa.Table) -> dict[int, int]:
    """Per key, its changes: `+I`, `-D` and a `-U`/`+U` pair count one each."""
    count: dict[int, int] = {}
    for c in changes.to_pylist():
        if c["_row_kind"] != "+U":
            count[c["id"]] = count.get(c["id"], 0) + 1
    return count


def _paimons_changes_per_key(taken: set[int], written: set[int], before: dict[int, Any], after: dict[int, Any],
                             first_row: bool) -> dict[int, int]:
    """Paimon's changes of a step per key: one for each key whose level-0 records its compaction
    takes up (`taken`, or `written` by a normal writer, which compacts at commit) and that holds a
    row before or after (`+I`, `-U`/`+U`, `-D`; a delete of an absent key gives nothing);
    first-row: `+I` of new keys only."""
    touched = taken | written
    if first_row:
        return {k: 1 for k in touched if k in after and k not in before}
    return {k: 1 for k in touched if k in before or k in after}



def _run(options: dict[str, str], script: list[tuple[str, Any]]) -> None:
    warehouse = tempfile.mkdtemp(prefix="write-only-")
    try:
        catalog = Catalog(warehouse)
        catalog.create_database("db")
        catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
            "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup", **options}))
        table = catalog.get_table("db.t")
        streams: list[tuple[Any, Any, list[pa.Table]]] = []
        state: dict[int, tuple[Any, Any]] = {}
        for action, arg in script:
            level0 = _level0_keys(table)
            latest = table.latest_snapshot()
            start = latest.id if latest is not None else 0
            if action == "compact":
                table.compact(full=arg)
            else:
                writing = table.copy({"write-only": "true"}) if action == "write-only" else table
                wb = writing.new_batch_write_builder()
                w, c = wb.new_write(), wb.new_commit()
                w.write_arrow(pa.table({"id": [k for k, _, _ in arg], "v": [v for _, v, _ in arg],
                                        "w": [v for _, v, _ in arg], "rk": [r for _, _, r in arg]}, schema=SCHEMA))
                c.commit(w.prepare_commit())
            after = _above_level0(table)
            assert strict_replay(kinds_keys_values(table.changes(0), "v", "w")) == after, f"after {action} {arg}"
            # As many changes per key as Paimon's compaction gives: one per key it takes up.
            left = _level0_keys(table)
            taken = {k for name, keys in level0.items() if name not in left for k in keys}
            written = {k for k, _, _ in arg} if action == "write" else set()
            ours = _changes_per_key(table.changes(start))
            paimons = _paimons_changes_per_key(taken, written, state, after, "first-row" in options.values())
            assert ours == paimons, f"{action} {arg}: changes per key"
            state = after
            # A stream starting here: its first plan, then whatever the later steps change.
            builder = table.new_stream_read_builder().with_include_row_kind()
            scan, read_ = builder.new_streaming_scan(), builder.new_read()
            streams.append((scan, read_, [read_.to_arrow(scan.plan().splits())]))
        table.compact()  # level 0 up: its changelog given, the whole table is what the changes say
        final = {r["id"]: (r["v"], r["w"]) for r in read(table).to_pylist()}
        assert strict_replay(kinds_keys_values(table.changes(0), "v", "w")) == final, "after the last compaction"
        for i, (scan, read_, seen) in enumerate(streams):
            while (plan := scan.plan()).snapshot_id is not None:
                seen.append(read_.to_arrow(plan.splits()))
            assert strict_replay(kinds_keys_values(pa.concat_tables(seen), "v", "w")) == final, f"a stream started after step {i}"
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_write_only_and_normal_commits_and_compactions_change_the_table_as_their_changes_say(engine: str) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(script=steps)
    def check(script: list[tuple[str, Any]]) -> None:
        _run(ENGINES[engine], script)

    check()


def test_a_stream_starting_between_a_write_only_commit_and_the_compaction_receives_its_rows(tmp_path: Any) -> None:
    """A stream's first plan of a `lookup` table leaves level 0 out, as Paimon's does: a write-only
    commit's rows wait there without changelog, and the compaction taking them up gives it."""
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup"}))
    table = catalog.get_table("db.t")
    wb = table.copy({"write-only": "true"}).new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": [1], "v": [10], "w": [10], "rk": ["+I"]}, schema=SCHEMA))
    c.commit(w.prepare_commit())
    scan = table.new_stream_read_builder().new_streaming_scan()
    read_ = table.new_stream_read_builder().new_read()
    seen = [read_.to_arrow(scan.plan().splits())]
    table.compact()
    while (plan := scan.plan()).snapshot_id is not None:
        seen.append(read_.to_arrow(plan.splits()))
    assert seen[0].num_rows == 0
    assert pa.concat_tables(seen).column("id").to_pylist() == [1]


def test_a_write_only_commit_gives_no_changelog_and_the_compaction_taking_its_level_0_up_gives_it(
        tmp_path: Any) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup"}))
    table = catalog.get_table("db.t")

    def commit(t: Any, ids: list[int], v: int) -> list[int]:
        wb = t.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(pa.table({"id": ids, "v": [v] * len(ids), "w": [v] * len(ids), "rk": ["+I"] * len(ids)},
                               schema=SCHEMA))
        return list(c.commit(w.prepare_commit()))

    commit(table, [1, 2], 1)
    [appended] = commit(table.copy({"write-only": "true"}), [2, 3], 2)
    snapshot = table.snapshot(appended)
    assert (snapshot.commit_kind, snapshot.changelog_manifest_list) == ("APPEND", None)
    assert table.changes(appended - 1).num_rows == 0
    [compacted] = table.compact()
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in table.changes(appended).to_pylist()]
    assert table.snapshot(compacted).commit_kind == "COMPACT"
    assert changes == [("-U", 2, 1), ("+U", 2, 2), ("+I", 3, 2)]


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_normal_commit_of_a_key_a_write_only_commit_left_in_level_0_gives_one_change(
        engine: str, tmp_path: Any) -> None:
    """As Paimon's writer, whose compaction at commit takes the write-only level 0 and its own
    flush up together (LookupChangelogMergeFunctionWrapper): one change per key, not the level
    0's and then the flush's."""
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup", **ENGINES[engine]}))
    table = catalog.get_table("db.t")

    def commit(t: Any, ids: list[int], v: int) -> list[int]:
        wb = t.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(pa.table({"id": ids, "v": [v] * len(ids), "w": [v] * len(ids), "rk": ["+I"] * len(ids)},
                               schema=SCHEMA))
        return list(c.commit(w.prepare_commit()))

    commit(table, [1], 1)
    [appended] = commit(table.copy({"write-only": "true"}), [1, 2], 2)
    commit(table, [1, 2, 3], 3)
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in table.changes(appended).to_pylist()]
    if engine == "first-row":
        assert changes == [("+I", 2, 2), ("+I", 3, 3)]
    elif engine.startswith("aggregation"):
        assert changes == [("-U", 1, 1), ("+U", 1, 6), ("+I", 2, 5), ("+I", 3, 3)]
    else:
        assert changes == [("-U", 1, 1), ("+U", 1, 3), ("+I", 2, 3), ("+I", 3, 3)]
    final = {r["id"]: (r["v"], r["w"]) for r in read(table).to_pylist()}
    assert strict_replay(kinds_keys_values(table.changes(0), "v", "w")) == final


@pytest.mark.parametrize("engine", ["deduplicate", "aggregation", "deletion-vectors"])
def test_when_the_compaction_at_commit_loses_the_level_0_it_left_gives_its_changelog_once(
        engine: str, tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The normal writer's flush left its run's changelog to its compaction at commit (the bucket
    held write-only level 0); another compaction takes that level 0 up first, so the writer's
    loses: its run stays in level 0 with its changelog not given, and the committer's compaction
    gives it. Each key changes once, and the changes replay to the table."""
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup", **ENGINES[engine]}))
    table = catalog.get_table("db.t")

    def rows(ids: list[int], v: int) -> pa.Table:
        return pa.table({"id": ids, "v": [v] * len(ids), "w": [v] * len(ids), "rk": ["+I"] * len(ids)},
                        schema=SCHEMA)

    def commit(t: Any, ids: list[int], v: int) -> list[int]:
        wb = t.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(rows(ids, v))
        return list(c.commit(w.prepare_commit()))

    commit(table, [1], 1)
    [appended] = commit(table.copy({"write-only": "true"}), [2], 2)
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(rows([1, 3], 3))
    messages = w.prepare_commit()
    table.compact(level0_only=True)  # the write-only level 0 goes up first
    c.commit(messages)
    assert "lost to a concurrent change" in caplog.text
    per_key = _changes_per_key(table.changes(appended))
    assert per_key == {1: 1, 2: 1, 3: 1}
    assert not _level0_keys(table)  # the committer took the writer's run up, with its changelog
    final = {r["id"]: (r["v"], r["w"]) for r in read(table).to_pylist()}
    assert strict_replay(kinds_keys_values(table.changes(0), "v", "w")) == final


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation", "deletion-vectors"])
def test_flushes_before_and_after_a_stop_trigger_compaction_took_the_write_only_level_0_up(
        engine: str, tmp_path: Any) -> None:
    """Several flushes in one commit: those while the write-only level 0 waits leave their
    changelog to the compaction taking it up (here at the stop trigger), the later ones give
    their own again. Each key changes once per compaction that takes it up."""
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup", "write-buffer-size": "1 b",
        "num-sorted-run.stop-trigger": "3",
        "num-sorted-run.compaction-trigger": "3", **ENGINES[engine]}))
    table = catalog.get_table("db.t")

    def rows(ids: list[int], v: int) -> pa.Table:
        return pa.table({"id": ids, "v": [v] * len(ids), "w": [v] * len(ids), "rk": ["+I"] * len(ids)},
                        schema=SCHEMA)

    def commit(t: Any, batches: list[tuple[list[int], int]]) -> list[int]:
        wb = t.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        for ids, v in batches:
            w.write_arrow(rows(ids, v))  # (a buffer of one byte: each batch is a flush)
        return list(c.commit(w.prepare_commit()))

    commit(table, [([1, 2], 1)])
    [appended] = commit(table.copy({"write-only": "true"}), [([1, 3], 2)])
    commit(table, [([1, 4], 3), ([1, 3], 4), ([1, 5], 5), ([1, 2], 6)])
    changes = table.changes(appended)
    final = {r["id"]: (r["v"], r["w"]) for r in read(table).to_pylist()}
    assert strict_replay(kinds_keys_values(table.changes(0), "v", "w")) == final
    assert not _level0_keys(table)
    per_key = _changes_per_key(changes)
    key1 = [(r["_row_kind"], r["v"]) for r in changes.to_pylist() if r["id"] == 1]
    # Key 1's first change goes from its row above level 0 straight to its row after the first
    # flush (the write-only record merged in): one change, not the level 0's and then the run's.
    if engine == "deletion-vectors":
        # The DV table compacts at commit only: every flush waits for it, one change per key.
        assert key1 == [("-U", 1), ("+U", 6)]
        assert per_key == {1: 1, 2: 1, 3: 1, 4: 1, 5: 1}
    else:
        assert key1[:2] == [("-U", 1), ("+U", 6 if engine == "aggregation" else 3)]
        # After the stop-trigger compaction, each flush gives its own (key 1 in three more, key
        # 3 in one more).
        assert per_key == {1: 4, 2: 1, 3: 2, 4: 1, 5: 1}


def test_a_flush_after_a_stop_trigger_compaction_reads_the_runs_it_compacted_once(tmp_path: Any) -> None:
    """A normal writer's levels hold its runs, or the files that compacted them: its flush lookup
    reads those, not the runs again (an aggregation's old row summed one run twice before)."""
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup", "write-buffer-size": "1 b",
        "num-sorted-run.stop-trigger": "3", "num-sorted-run.compaction-trigger": "3", **ENGINES["aggregation"]}))
    table = catalog.get_table("db.t")
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    for v in (1, 2, 3, 4):  # (a buffer of one byte: each batch is a flush; the third compacts)
        w.write_arrow(pa.table({"id": [1], "v": [v], "w": [v], "rk": ["+I"]}, schema=SCHEMA))
    c.commit(w.prepare_commit())
    changes = [(r["_row_kind"], r["v"]) for r in table.changes(0).to_pylist()]
    assert changes == [("+I", 1), ("-U", 1), ("+U", 3), ("-U", 3), ("+U", 6), ("-U", 6), ("+U", 10)]
    assert strict_replay(kinds_keys_values(table.changes(0), "v", "w")) == {1: (10, 10)}
