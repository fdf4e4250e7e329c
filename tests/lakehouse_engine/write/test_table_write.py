"""What a TableWrite leaves for readers at commit, whatever writes it (found by the feature-interaction
audit): a `lookup` table's readers skip level 0 in their first streaming plan, as Paimon's do, so
every writer of such a table, not only the one of new rows, takes its level 0 up at commit."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.string())])


def _table(catalog: Catalog, **options: str) -> FileStoreTable:
    return create_table(catalog, "t", SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": "2", "changelog-producer": "lookup", **options})


def _rows(*rows: tuple[int, str, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "dt": d, "v": v} for i, d, v in rows], schema=SCHEMA)


def _first_stream_plan(table: FileStoreTable) -> list[tuple[int, str, str]]:
    """The rows of a new stream's first plan (`latest-full`: the latest snapshot in full)."""
    builder = table.new_stream_read_builder()
    plan = builder.new_streaming_scan().plan()
    return sorted((r["id"], r["dt"], r["v"]) for r in builder.new_read().to_arrow(plan.splits()).to_pylist())


def _levels(table: FileStoreTable) -> list[int]:
    latest = table.latest_snapshot()
    assert latest is not None
    return sorted(e.file.level for e in table.store.manifest_io().live_entries(latest))


def test_an_overwrite_of_a_lookup_table_takes_its_level_0_up_so_a_new_stream_sees_its_rows(catalog: Catalog) -> None:
    t = _table(catalog)
    write(t, _rows((1, "a", "x"), (2, "b", "y")))
    write(t, _rows((3, "a", "z"), (4, "a", "w")), overwrite={"dt": "a"})
    assert 0 not in _levels(t)
    assert _first_stream_plan(t) == [(2, "b", "y"), (3, "a", "z"), (4, "a", "w")]
    # The overwrite commits no changelog (as Paimon's): a stream reading on skips it.
    assert [s.commit_kind for s in t.snapshots()][-2:] == ["OVERWRITE", "COMPACT"]
    assert t.changes(2).num_rows == 0


def test_a_rescale_of_a_lookup_table_takes_level_0_up_so_a_new_stream_sees_every_row(catalog: Catalog) -> None:
    t = _table(catalog)
    write(t, _rows(*[(i, "ab"[i % 2], f"v{i}") for i in range(20)]))
    t.rescale(3)
    t = catalog.get_table("db.t")
    assert 0 not in _levels(t)
    assert _first_stream_plan(t) == sorted((i, "ab"[i % 2], f"v{i}") for i in range(20))
    assert read(t).num_rows == 20


def test_postpone_compaction_of_a_lookup_table_takes_level_0_up_so_a_new_stream_sees_every_row(
        catalog: Catalog) -> None:
    t = _table(catalog, bucket="-2")
    write(t, _rows((1, "a", "x"), (2, "b", "y")))
    t.compact_postpone()
    write(t, _rows((1, "a", "x2"), (3, "a", "z")))
    t.compact_postpone()
    assert 0 not in _levels(t)
    assert _first_stream_plan(t) == [(1, "a", "x2"), (2, "b", "y"), (3, "a", "z")]
    # The changelog the postpone compactions made is still there, before-images and all.
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()]
    assert ("-U", 1, "x") in changes and ("+U", 1, "x2") in changes


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_an_overwrite_writer_compacts_only_its_own_files(catalog: Catalog, producer: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    # Paimon's overwrite writer ignores the bucket's previous files: the stop trigger of a bucket
    # holding many sorted runs compacted the old runs (which the overwrite deletes) with the new,
    # a compaction that then lost to the overwrite itself.
    t = _table(catalog, **{"changelog-producer": producer, "bucket": "1"})
    write_only = t.copy({"write-only": "true"})
    for i in range(10):
        write(write_only, _rows((i, "a", f"old{i}")))
    with caplog.at_level(logging.WARNING):
        write(t, _rows((100, "a", "new")), overwrite={"dt": "a"})
    assert not [r for r in caplog.records if "lost to a concurrent change" in r.getMessage()]
    assert [(r["id"], r["v"]) for r in read(t).to_pylist()] == [(100, "new")]


@pytest.mark.parametrize("how", ["rescale", "overwrite"])
def test_a_rescale_or_overwrite_of_a_full_compaction_table_leaves_its_rows_at_the_top_level(
        catalog: Catalog, how: str) -> None:
    # Paimon's (batch) writer of a full-compaction table compacts its own files fully at commit,
    # and the overwrite drops that changelog. Left in level 0, the rows came back as +I at the next
    # full compaction: keys a stream had read already, again, without a retraction.
    t = _table(catalog, **{"changelog-producer": "full-compaction"})
    write(t, _rows(*[(i, "a", f"v{i}") for i in range(6)]))
    t.compact(full=True)
    before = t.latest_snapshot()
    assert before is not None
    if how == "rescale":
        t.rescale(3)
        t = catalog.get_table("db.t")
    else:
        write(t, _rows(*[(i, "a", f"v{i}") for i in range(6)]), overwrite={"dt": "a"})
    assert set(_levels(t)) == {5}
    assert _first_stream_plan(t) == sorted((i, "a", f"v{i}") for i in range(6))
    write(t, _rows((0, "a", "new0")))
    t.compact(full=True)
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(before.id).to_pylist()]
    assert sorted(changes) == [("+U", 0, "new0"), ("-U", 0, "v0")]


def test_a_compaction_of_a_write_only_lookup_table_takes_level_0_up_so_a_new_stream_sees_its_rows(
        catalog: Catalog) -> None:
    t = _table(catalog, **{"write-only": "true"})
    write(t, _rows((1, "a", "x"), (2, "b", "y")))
    write(t, _rows((1, "a", "x2")))
    assert 0 in _levels(t)
    t.compact()
    assert 0 not in _levels(t)
    assert _first_stream_plan(t) == [(1, "a", "x2"), (2, "b", "y")]


def test_a_rescale_of_a_lookup_table_gives_the_changelog_of_the_rows_a_write_only_writer_left_in_level_0(
        catalog: Catalog) -> None:
    # The rescale's OVERWRITE gives no changelog: the write-only rows (no changelog yet, as in
    # Paimon) are compacted up with theirs first, else a stream would never receive them.
    t = _table(catalog)
    write(t, _rows((1, "a", "x"), (2, "b", "y")))
    write(t.copy({"write-only": "true"}), _rows((1, "a", "x2"), (3, "a", "z")))
    t.rescale(3)
    t = catalog.get_table("db.t")
    assert [s.commit_kind for s in t.snapshots()][-3:] == ["COMPACT", "OVERWRITE", "COMPACT"]
    state: dict[int, str] = {}
    for r in t.changes(0).to_pylist():
        if r["_row_kind"] in ("+I", "+U"):
            state[r["id"]] = r["v"]
        else:
            assert state.pop(r["id"]) == r["v"]
    assert state == {1: "x2", 2: "y", 3: "z"} == {r["id"]: r["v"] for r in read(t).to_pylist()}
