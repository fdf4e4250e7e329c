"""The DV writer's read-ahead of its lookup (`write.lookup_prefetch.LookupPrefetch`).

Specification: a writer of a deletion-vector table reads the key columns of the older files of each
bucket it writes into the lookup cache on a background thread while it still takes rows, so the
lookup at commit of a fresh process decodes none of them; the read-ahead only warms the cache: when
it fails, or the cache is off, the commit reads the files itself and writes the same vectors.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, clear_caches
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows, write

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _table(catalog: Catalog, name: str, **options: str) -> FileStoreTable:
    t = create_table(catalog, name, SCHEMA, ["id"],
                     options={"deletion-vectors.enabled": "true", "bucket": "2", **options})
    write(t, pa.table({"id": list(range(1000)), "v": [f"a{i}" for i in range(1000)]}, schema=SCHEMA))
    return t


def _upsert(t: FileStoreTable) -> None:
    ids = list(range(0, 1000, 7)) + [1000, 1001]
    write(t, pa.table({"id": ids, "v": [f"b{i}" for i in ids]}, schema=SCHEMA))


def _expected() -> list[dict[str, Any]]:
    return [{"id": i, "v": ("b" if i % 7 == 0 or i >= 1000 else "a") + str(i)} for i in range(1002)]


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, bool]]:
    """(thread name, file name, served from the cache) of every read through a lookup cache."""
    seen: list[tuple[str, str, bool]] = []
    lock = threading.Lock()
    original = CachedFileReader.read

    def spy(self: CachedFileReader, path: str, columns: Any, schema: pa.Schema, meta: Any) -> pa.Table:
        hit = self.cache is not None and self.cache.get(path, self.schema_id, schema) is not None
        with lock:
            seen.append((threading.current_thread().name, path.rsplit("/", 1)[-1], hit))
        return original(self, path, columns, schema, meta)

    monkeypatch.setattr(CachedFileReader, "read", spy)
    return seen


def _older_files(t: FileStoreTable) -> set[str]:
    return {e.file.file_name for e in t.store.manifest_io().live_entries(t.latest_snapshot())}


def test_a_fresh_writer_reads_the_older_keys_ahead_and_its_lookup_decodes_none(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(catalog, "t")
    older = _older_files(t)
    clear_caches()  # as a fresh process
    seen = _reads(monkeypatch)
    _upsert(t)
    ahead = {name for thread, name, _ in seen if thread.startswith("dv-lookup-prefetch")}
    assert ahead == older  # every older file read ahead, on the read-ahead thread
    lookups = [(name, hit) for thread, name, hit in seen
               if not thread.startswith("dv-lookup-prefetch") and name in older]
    assert lookups and all(hit for _, hit in lookups)  # the commit's lookup found them decoded
    assert rows(read(t), "id") == _expected()


def test_a_failed_read_ahead_leaves_the_lookup_to_read_the_files(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(catalog, "t")
    reference = _table(catalog, "ref", **{"lookup.cache-max-memory-size": "0"})
    clear_caches()
    original = CachedFileReader.read

    def failing(self: CachedFileReader, *args: Any) -> pa.Table:
        if threading.current_thread().name.startswith("dv-lookup-prefetch"):
            raise OSError("storage unavailable")
        return original(self, *args)

    monkeypatch.setattr(CachedFileReader, "read", failing)
    # (Writers other tests of this process left to the garbage collector may still hold theirs.)
    before = {th for th in threading.enumerate() if th.name.startswith("dv-lookup-prefetch")}
    _upsert(t)
    _upsert(reference)  # the cache off: no read-ahead at all, the lookup reads every file
    assert rows(read(t), "id") == rows(read(reference), "id") == _expected()
    for table in (t, reference):
        live = table.store.manifest_io().live_entries(table.latest_snapshot())
        assert all(e.file.level > 0 for e in live)
    assert not [th for th in threading.enumerate() if th.name.startswith("dv-lookup-prefetch") and th not in before]


def test_without_a_lookup_cache_nothing_is_read_ahead(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(catalog, "t", **{"lookup.cache-max-memory-size": "0"})
    seen = _reads(monkeypatch)
    _upsert(t)
    assert seen and not [s for s in seen if s[0].startswith("dv-lookup-prefetch")]
    assert rows(read(t), "id") == _expected()


def test_only_the_files_whose_key_range_meets_the_written_keys_are_read_ahead(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={"deletion-vectors.enabled": "true", "bucket": "1"})
    for low in (0, 500):  # two files above level 0 with disjoint key ranges
        ids = list(range(low, low + 500))
        write(t, pa.table({"id": ids, "v": [f"a{i}" for i in ids]}, schema=SCHEMA))
    live = t.store.manifest_io().live_entries(t.latest_snapshot())
    assert len(live) == 2 and all(e.file.level > 0 for e in live)
    # The first write's file moved up to the highest level, the second's to the one below it.
    low_file = max(live, key=lambda e: e.file.level).file.file_name
    clear_caches()
    seen = _reads(monkeypatch)
    ids = list(range(0, 100, 3))
    write(t, pa.table({"id": ids, "v": [f"b{i}" for i in ids]}, schema=SCHEMA))
    assert {name for thread, name, _ in seen if thread.startswith("dv-lookup-prefetch")} == {low_file}
    expected = [{"id": i, "v": ("b" if i < 100 and i % 3 == 0 else "a") + str(i)} for i in range(1000)]
    assert rows(read(t), "id") == expected
