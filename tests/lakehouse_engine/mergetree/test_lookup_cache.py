"""The lookup cache: decoded columns of data files kept between commits, bounded by the table's
`lookup.cache-*` options, never serving a row a file does not hold."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.mergetree.lookup_cache import (
    CachedFileReader,
    LookupCache,
    cache_for,
    clear_caches,
)
from lakehouse_engine.options import CoreOptions
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, put, replay


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    clear_caches()
    yield
    clear_caches()


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(np.arange(start, start + n), pa.int64()),
                     "v": pa.array(np.arange(n) * 2, pa.int64())})


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# ---- the cache itself -----------------------------------------------------------------------
def test_a_cached_file_reads_back_its_columns_and_a_missing_column_is_a_miss() -> None:
    cache = LookupCache(1 << 20, 3600)
    rows = _rows(100)
    cache.put("f1", 0, rows.select(["id"]))
    assert cache.get("f1", 0, rows.select(["id"]).schema).equals(rows.select(["id"]))
    assert cache.get("f1", 0, rows.schema) is None            # `v` is not cached yet
    assert cache.get("f1", 1, rows.select(["id"]).schema) is None  # read as another schema version
    cache.put("f1", 0, rows.select(["v"]))                    # a later read adds its columns
    assert cache.get("f1", 0, rows.schema).equals(rows)
    other_type = pa.schema([pa.field("id", pa.int32())])
    assert cache.get("f1", 0, other_type) is None


def test_a_read_of_more_columns_than_cached_decodes_only_the_others() -> None:
    # (A lookup reads a file's keys first, then, for a file holding a key sought, the rest.)
    cache = LookupCache(1 << 20, 3600)
    rows = _rows(100)
    decoded: list[list[str]] = []

    class Reader:
        schema = type("S", (), {"id": 0})()

        def read(self, path: str, columns: list[str], schema: pa.Schema, meta: Any) -> pa.Table:
            decoded.append(list(columns))
            assert schema.names == list(columns)
            return rows.select(list(columns))

    meta = type("M", (), {"row_count": 100})()
    reader = CachedFileReader(Reader(), cache)  # type: ignore[arg-type]
    assert reader.read("f1", ["id"], rows.select(["id"]).schema, meta).equals(rows.select(["id"]))
    assert reader.read("f1", ["id", "v"], rows.schema, meta).equals(rows)
    assert reader.read("f1", ["v", "id"], rows.select(["v", "id"]).schema, meta).equals(rows.select(["v", "id"]))
    assert decoded == [["id"], ["v"]]


def test_memory_stays_within_the_bound_least_recently_used_out() -> None:
    one = _rows(1000).nbytes
    cache = LookupCache(3 * one, 3600)
    for name in ("a", "b", "c"):
        cache.put(name, 0, _rows(1000))
    assert cache.get("a", 0, _rows(1).schema) is not None  # `a` is now the most recently used
    cache.put("d", 0, _rows(1000))
    assert cache.files() == ["c", "a", "d"]
    assert cache.nbytes <= cache.max_bytes == 3 * one
    for i in range(20):
        cache.put(f"x{i}", 0, _rows(1000))
        assert cache.nbytes <= 3 * one
    assert len(cache.files()) == 3


def test_a_file_larger_than_the_whole_cache_is_not_kept() -> None:
    cache = LookupCache(_rows(10).nbytes, 3600)
    cache.put("big", 0, _rows(1000))
    assert cache.files() == [] and cache.nbytes == 0


def test_an_entry_unused_for_the_retention_is_dropped() -> None:
    clock = _Clock()
    cache = LookupCache(1 << 20, 60, clock)
    cache.put("a", 0, _rows(10))
    cache.put("b", 0, _rows(10))
    clock.now = 50
    assert cache.get("a", 0, _rows(1).schema) is not None  # used: its retention starts again
    clock.now = 100
    assert cache.get("b", 0, _rows(1).schema) is None       # unused for 100 s > 60 s
    assert cache.files() == ["a"]
    clock.now = 200
    assert cache.get("a", 0, _rows(1).schema) is None
    assert cache.nbytes == 0


def test_the_tables_options_bound_its_cache_and_zero_turns_it_off() -> None:
    cache = cache_for("/t", CoreOptions({"lookup.cache-max-memory-size": "1 mb",
                                         "lookup.cache-file-retention": "10 min"}))
    assert cache is not None and (cache.max_bytes, cache.retention_s) == (1 << 20, 600)
    cache.put("/t/bucket-0/f", 0, _rows(1000))
    again = cache_for("/t", CoreOptions({"lookup.cache-max-memory-size": "1 kb"}))
    assert again is cache and cache.max_bytes == 1024 and cache.files() == []  # shrunk: evicted
    assert cache_for("/t", CoreOptions({"lookup.cache-max-memory-size": "0 b"})) is None
    assert cache_for("/u", CoreOptions({})).max_bytes == 256 << 20  # Paimon's default


@pytest.mark.parametrize(("key", "value", "says"), [
    ("lookup.cache-max-memory-size", "-1 mb", "not a memory size"),
    ("lookup.cache-max-memory-size", "lots", "not a memory size"),
    ("lookup.cache-file-retention", "0 s", "must be greater than 0"),
    ("lookup.cache-max-disk-size", "ten gb", "not a memory size"),
])
def test_a_bad_cache_option_is_refused_naming_it(catalog: Catalog, key: str, value: str, says: str) -> None:
    with pytest.raises(InvalidOptionError, match=rf"option '{key}' has invalid value .*{says}"):
        create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "lookup", key: value})
    assert catalog.list_tables("db") == []


# ---- the cache in commits -------------------------------------------------------------------
def _lookup_table(catalog: Catalog, name: str, **options: Any) -> Any:
    opts = {"bucket": "2", "rowkind.field": "k", "changelog-producer": "lookup", **options}
    return create_table(catalog, name, SCHEMA, primary_keys=["id"], options=opts)


def _cache(table: Any) -> LookupCache:
    cache = cache_for(table.store.path_factory.table_path, table.schema.core_options)
    assert cache is not None
    return cache


def test_a_writer_keeps_its_runs_and_the_next_lookup_decodes_nothing(catalog: Catalog) -> None:
    t = _lookup_table(catalog, "t")
    put(t, *[(i, f"a{i}", "+I") for i in range(50)])
    cache = _cache(t)
    assert cache.files()  # the runs this process wrote
    misses, before = cache.misses, t.latest_snapshot().id
    put(t, *[(i, f"b{i}", "+I") for i in range(0, 80, 2)])
    assert cache.misses == misses and cache.hits > 0
    changes = change_tuples(t)
    assert [(k, i, v) for _, k, i, v in change_tuples(t, before) if i in (4, 70)] == [
        ("-U", 4, "a4"), ("+U", 4, "b4"), ("+I", 70, "b70")]
    assert replay(changes) == {r["id"]: r["v"] for r in read(t).to_pylist()}


def test_a_warm_cache_gives_the_changelog_a_fresh_process_gives(catalog: Catalog) -> None:
    batches = [[(i, f"a{i}", "+I") for i in range(40)],
               [(i, f"b{i}", "+I") for i in range(0, 60, 3)] + [(5, None, "-D"), (99, None, "-D")],
               [(i, f"c{i}", "+I") for i in range(0, 60, 4)] + [(7, None, "-D")]]
    warm, cold = _lookup_table(catalog, "warm"), _lookup_table(catalog, "cold")
    off = _lookup_table(catalog, "off", **{"lookup.cache-max-memory-size": "0 b"})
    for batch in batches:
        put(warm, *batch)
        clear_caches([cold.store.path_factory.table_path])
        put(cold, *batch)
        put(off, *batch)
    strip = [(s, k, i, v) for s, k, i, v in change_tuples(warm)]
    assert strip == change_tuples(cold) == change_tuples(off)
    assert cache_for(off.store.path_factory.table_path, off.schema.core_options) is None
    assert replay(strip) == {r["id"]: r["v"] for r in read(warm).to_pylist()}


@pytest.mark.parametrize("dv", [False, True])
def test_a_warm_cache_never_serves_rows_another_writer_replaced(catalog: Catalog, dv: bool) -> None:
    """Writer A caches the files it wrote; writer B (another table instance, so another writer)
    updates keys, a full compaction rewrites every file and expiry deletes the old ones: A's next
    upsert sees B's values as the old rows, and needs no deleted file."""
    options = ({"deletion-vectors.enabled": "true", "changelog-producer": "lookup"} if dv else {})
    a = _lookup_table(catalog, "t", **options)
    put(a, *[(i, f"a{i}", "+I") for i in range(30)])
    cached_before = set(_cache(a).files())
    b = catalog.get_table("db.t")
    put(b, *[(i, f"b{i}", "+I") for i in range(10)])
    b.compact(full=True)
    b.expire_snapshots(retain_max=1, retain_min=1)
    live = {e.file.file_name for e in b.store.manifest_io().live_entries(b.latest_snapshot())}
    gone = {p for p in cached_before if p.rsplit("/", 1)[-1] not in live}
    assert gone  # cached files the compaction replaced and expiry deleted
    assert not any(os.path.exists(p) for p in gone)
    before = a.latest_snapshot().id
    put(a, (3, "a-again", "+I"), (20, "a-again", "+I"))
    assert sorted(((k, i, v) for _, k, i, v in change_tuples(a, before)), key=lambda c: (c[1], c[0] != "-U")) == [
        ("-U", 3, "b3"), ("+U", 3, "a-again"), ("-U", 20, "a20"), ("+U", 20, "a-again")]
    rows = {r["id"]: r["v"] for r in read(a).to_pylist()}
    assert rows[3] == rows[20] == "a-again" and rows[4] == "b4" and rows[25] == "a25" and len(rows) == 30


def test_all_tables_caches_together_stay_within_the_largest_bound() -> None:
    one = _rows(1000).nbytes
    options = CoreOptions({"lookup.cache-max-memory-size": f"{3 * one} b"})
    caches = [cache_for(f"/t{i}", options) for i in range(3)]
    for i, cache in enumerate(caches):
        assert cache is not None
        cache.put(f"/t{i}/bucket-0/a", 0, _rows(1000))
        cache.put(f"/t{i}/bucket-0/b", 0, _rows(1000))
    assert sum(c.nbytes for c in caches if c is not None) <= 3 * one
    # The most recently used files stay: the last table's two and the one before them.
    assert caches[2] is not None and caches[2].files() == ["/t2/bucket-0/a", "/t2/bucket-0/b"]
    assert caches[0] is not None and caches[0].files() == []
