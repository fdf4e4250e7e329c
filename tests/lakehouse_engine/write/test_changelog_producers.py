"""The changelog each producer writes, against Paimon's definition, replayed to the table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import UnsupportedError
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, put, replay

BATCHES = [
    [(1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I")],
    [(1, "a2", "+I"), (2, None, "-D"), (4, "d", "+I"), (9, None, "-D"), (3, "c", "+I")],
    [(4, "d2", "+I"), (4, "d3", "+I"), (1, None, "-D")],
]


def _table(catalog: Catalog, producer: str, **options: Any) -> Any:
    opts = {"bucket": "2", "rowkind.field": "k", "changelog-producer": producer, **options}
    return create_table(catalog, f"t_{producer.replace('-', '_')}", SCHEMA, primary_keys=["id"], options=opts)


def _per_commit(changes: list[tuple[int, str, int, Any]]) -> list[list[tuple[str, int, Any]]]:
    by: dict[int, list[tuple[str, int, Any]]] = {}
    for sid, kind, k, v in changes:
        by.setdefault(sid, []).append((kind, k, v))
    return [sorted(v, key=lambda c: c[1]) for _, v in sorted(by.items())]


def _table_rows(table: Any) -> dict[int, Any]:
    t = read(table)
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


def test_input_writes_the_records_as_given_in_the_append_snapshot(catalog: Catalog) -> None:
    t = _table(catalog, "input")
    for batch in BATCHES:
        put(t, *batch)
    assert [s.commit_kind for s in t.snapshots() if s.changelog_manifest_list] == ["APPEND"] * 3
    assert all(s.changelog_record_count == len(b) for s, b in zip(t.snapshots(), BATCHES, strict=True))
    assert _per_commit(change_tuples(t)) == [
        [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")],
        [("+I", 1, "a2"), ("-D", 2, None), ("+I", 3, "c"), ("+I", 4, "d"), ("-D", 9, None)],
        [("-D", 1, None), ("+I", 4, "d2"), ("+I", 4, "d3")],
    ]
    names = [f for f in (t.store.manifest_io().read_manifest(m.file_name)
                         for s in t.snapshots()
                         for m in t.store.manifest_io().read_manifest_list(s.changelog_manifest_list))]
    assert all(e.file.file_name.startswith("changelog-") for es in names for e in es)


@pytest.mark.parametrize("dedupe", [False, True])
def test_lookup_gives_before_and_after_per_key_in_the_compact_snapshot(catalog: Catalog, dedupe: bool) -> None:
    t = _table(catalog, "lookup", **{"changelog-producer.row-deduplicate": str(dedupe).lower()})
    for batch in BATCHES:
        put(t, *batch)
    assert {s.commit_kind for s in t.snapshots() if s.changelog_manifest_list} == {"COMPACT"}
    unchanged = [] if dedupe else [("-U", 3, "c"), ("+U", 3, "c")]
    assert _per_commit(change_tuples(t)) == [
        [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")],
        sorted([("-U", 1, "a"), ("+U", 1, "a2"), ("-D", 2, "b"), *unchanged, ("+I", 4, "d")],
               key=lambda c: c[1]),
        [("-D", 1, "a2"), ("-U", 4, "d"), ("+U", 4, "d3")],
    ]
    assert replay(change_tuples(t)) == _table_rows(t)


def test_full_compaction_gives_the_difference_between_two_full_compactions(catalog: Catalog) -> None:
    t = _table(catalog, "full-compaction", **{"write-only": "true"})
    put(t, *BATCHES[0])
    t.compact(full=True)
    put(t, *BATCHES[1])
    put(t, *BATCHES[2])
    t.compact(full=True)
    assert _per_commit(change_tuples(t)) == [
        [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")],
        [("-D", 1, "a"), ("-D", 2, "b"), ("-U", 3, "c"), ("+U", 3, "c"), ("+I", 4, "d3")],
    ]
    assert replay(change_tuples(t)) == _table_rows(t)


@pytest.mark.parametrize("engine,expected", [
    ("partial-update", [("-U", 1, "a"), ("+U", 1, "a")]),
    ("first-row", []),
])
def test_lookup_merges_before_and_after_with_the_merge_engine(catalog: Catalog, engine: str,
                                                              expected: list[Any]) -> None:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "lookup", "merge-engine": engine})
    put(t, (1, "a", "+I"))
    put(t, (1, None, "+I"), (5, "e", "+I"))
    second = _per_commit(change_tuples(t, 2))
    assert second == [sorted(expected + [("+I", 5, "e")], key=lambda c: c[1])]


@pytest.mark.parametrize("key,value", [("changelog-file.stats-mode", "none"), ("changelog-file.prefix", "cl-"),
                                       ("changelog-producer.row-deduplicate-ignore-fields", "v")])
def test_changelog_options_not_applied_are_refused_when_a_producer_writes(catalog: Catalog, key: str,
                                                                          value: str) -> None:
    t = _table(catalog, "input", **{key: value})
    with pytest.raises(UnsupportedError, match=key):
        t.new_batch_write_builder().new_write()


def test_input_changelog_of_a_flush_nothing_merged_in_shares_the_data_files_bytes(catalog: Catalog) -> None:
    """Batches 1 and 2 repeat no key: their changelog is their level-0 run, record for record, so
    its files are the run's bytes under changelog names (nothing encoded twice). Batch 3 writes key
    4 twice: its changelog holds both records, the run one, so it is written on its own. The
    changelog outlives the data files it shares bytes with (a long-lived changelog, once the full
    compaction's input files have expired)."""
    import os

    t = _table(catalog, "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                    "changelog.num-retained.max": "20", "write-only": "true"})
    for batch in BATCHES:
        put(t, *batch)
    mio = t.store.manifest_io()

    def inodes(s: Any, which: str) -> set[int]:
        names = [(e.bucket, e.file.file_name) for m in mio.read_manifest_list(getattr(s, which))
                 for e in mio.read_manifest(m.file_name)]
        return {os.stat(f"{t.store.path_factory.bucket_dir({}, b)}/{n}").st_ino for b, n in names}

    shared = [inodes(s, "changelog_manifest_list") == inodes(s, "delta_manifest_list") for s in t.snapshots()]
    assert shared == [True, True, False]
    before = change_tuples(t)
    t.compact(full=True)
    t.expire_snapshots()
    assert t.snapshot_manager().earliest_snapshot_id() == 4  # the APPENDs' data files are deleted
    assert change_tuples(t) == before
    assert replay(before) == _table_rows(t)


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_float_keys_change_as_paimon_orders_them(catalog: Catalog, producer: str) -> None:
    """-0.0 and 0.0 are two keys, every NaN one (Java's Double.compare): updating -0.0 gives the
    -U/+U pair of -0.0 alone, and rewriting NaN with a new value pairs it with the old NaN."""
    schema = pa.schema([pa.field("id", pa.float64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, f"f_{producer.replace('-', '_')}", schema, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": producer})

    def put_floats(rows: list[tuple[float, str]]) -> None:
        write(t, pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=schema))
        if producer == "full-compaction":
            t.compact(full=True)

    nan = float("nan")
    put_floats([(0.0, "zero"), (-0.0, "minus"), (nan, "nan"), (1.0, "one")])
    first = t.latest_snapshot().id
    put_floats([(-0.0, "minus2"), (nan, "nan2")])
    got = [(k, str(i), v) for _, k, i, v in change_tuples(t, first)]
    assert sorted(got) == sorted([("-U", "-0.0", "minus"), ("+U", "-0.0", "minus2"),
                                  ("-U", "nan", "nan"), ("+U", "nan", "nan2")])
