"""The `lookup` changelog writer's read-ahead (`write.lookup_prefetch.LookupPrefetch`).

Specification: while a writer of a `lookup` changelog table takes rows, a background thread decodes
into the lookup cache the key columns and `_VALUE_KIND` of the older files of each bucket written,
and the other columns of those holding a written key (a key found in a newer file is not sought
in older ones): the flush lookup of a fresh process then decodes nothing. No column of a file is
decoded twice, whenever the flush comes; the read-ahead only warms the cache, so the changelog is
the same with it, without it (the cache off) and when it fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.mergetree.evolution import EvolvingFileReader
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, clear_caches
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.read.changes_helpers import change_tuples

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
THREAD = "changelog-lookup-prefetch"
KEYS = ("id", "_VALUE_KIND")
VALUES = ("v", "_SEQUENCE_NUMBER")


def _table(catalog: Catalog, name: str, buckets: int = 2, **options: str) -> FileStoreTable:
    return create_table(catalog, name, SCHEMA, ["id"],
                        options={"bucket": str(buckets), "changelog-producer": "lookup", **options})


def _batch(ids: list[int], prefix: str) -> pa.Table:
    return pa.table({"id": ids, "v": [f"{prefix}{i}" for i in ids]}, schema=SCHEMA)


def _commit(t: FileStoreTable, *batches: pa.Table, before_commit: Callable[[], None] = lambda: None) -> None:
    """One commit of `batches`, each its own write call."""
    wb = t.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    for batch in batches:
        write.write_arrow(batch)
    before_commit()
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, tuple[str, ...]]]:
    """(thread name, file name, columns) of every decode of a data file (a lookup cache miss)."""
    seen: list[tuple[str, str, tuple[str, ...]]] = []
    lock = threading.Lock()
    original = EvolvingFileReader.read

    def spy(self: EvolvingFileReader, path: str, columns: Any, *args: Any, **kwargs: Any) -> pa.Table:
        with lock:
            seen.append((threading.current_thread().name, path.rsplit("/", 1)[-1], tuple(columns)))
        return original(self, path, columns, *args, **kwargs)

    monkeypatch.setattr(EvolvingFileReader, "read", spy)
    return seen


def _older_files(t: FileStoreTable) -> dict[str, int]:
    """File name -> level of the table's live data files."""
    return {e.file.file_name: e.file.level for e in t.store.manifest_io().live_entries(t.latest_snapshot())}


def _columns_ahead(seen: list[tuple[str, str, tuple[str, ...]]]) -> dict[str, set[str]]:
    """File name -> the columns the read-ahead thread decoded of it."""
    out: dict[str, set[str]] = {}
    for thread, name, columns in list(seen):
        if thread.startswith(THREAD):
            out.setdefault(name, set()).update(columns)
    return out


def _until(done: Callable[[], bool]) -> Callable[[], None]:
    """Waits (at most 20 s) until `done()`: the read-ahead has caught up."""
    def wait() -> None:
        deadline = time.monotonic() + 20
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done(), "the read-ahead did not finish"
    return wait


def test_a_fresh_writer_reads_the_older_rows_ahead_and_its_flush_lookup_decodes_none(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t, reference = _table(catalog, "t"), _table(catalog, "ref", **{"lookup.cache-max-memory-size": "0"})
    base = _batch(list(range(1000)), "a")
    for table in (t, reference):
        _commit(table, base)
    older = _older_files(t)
    clear_caches()  # as a fresh process
    seen = _decodes(monkeypatch)
    updates = [_batch(list(range(0, 1000, 7)), "b"), _batch([1000, 1001] + list(range(3, 1000, 11)), "c")]
    everything = set(KEYS + VALUES)
    _commit(t, *updates, before_commit=_until(
        lambda: {n: c for n, c in _columns_ahead(seen).items() if c >= everything}.keys() == older.keys()))
    flush = [(name, columns) for thread, name, columns in seen if not thread.startswith(THREAD) and name in older]
    assert flush == []  # the flush lookup found every older file decoded
    _commit(reference, *updates)
    assert change_tuples(t) == change_tuples(reference)
    assert rows(read(t), "id") == rows(read(reference), "id")


def test_only_the_keys_of_a_file_without_a_written_key_are_read_ahead(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(catalog, "t", buckets=1)
    _commit(t, _batch(list(range(0, 1000, 2)), "a"))  # the even ids: moved up to the highest level
    _commit(t, _batch(list(range(1, 1000, 2)), "a"))  # the odd ids: the level below it
    older = _older_files(t)
    evens = max(older, key=lambda n: older[n])
    odds = min(older, key=lambda n: older[n])
    clear_caches()
    seen = _decodes(monkeypatch)
    ids = list(range(0, 400, 4))  # even ids only: both files' key ranges meet them
    _commit(t, _batch(ids[:50], "b"), _batch(ids[50:], "b"),
            before_commit=_until(lambda: set(_columns_ahead(seen).get(evens, ())) >= set(VALUES)))
    ahead = _columns_ahead(seen)
    assert ahead[odds] == set(KEYS)
    assert ahead[evens] == set(KEYS + VALUES)
    assert rows(read(t), "id")[:4] == [{"id": 0, "v": "b0"}, {"id": 1, "v": "a1"}, {"id": 2, "v": "a2"},
                                       {"id": 3, "v": "a3"}]


def test_a_key_found_in_a_newer_file_is_not_sought_in_an_older_one(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(catalog, "t", buckets=1)
    _commit(t, _batch(list(range(1000)), "a"))  # every id, at the highest level
    _commit(t, _batch(list(range(100)), "b"))  # ids 0..99 again, the level below it (newer)
    older = _older_files(t)
    oldest = max(older, key=lambda n: older[n])
    newer = min(older, key=lambda n: older[n])
    clear_caches()
    seen = _decodes(monkeypatch)
    _commit(t, _batch(list(range(25)), "c"), _batch(list(range(25, 50)), "c"),
            before_commit=_until(lambda: set(_columns_ahead(seen).get(newer, ())) >= set(VALUES)))
    ahead = _columns_ahead(seen)
    assert ahead[newer] == set(KEYS + VALUES)
    assert ahead[oldest] == set(KEYS)  # every written key is in the newer file: the lookup stops there
    assert not [c for thread, name, c in seen if name == oldest and set(c) & set(VALUES)]
    assert [(k, i, v) for _, k, i, v in change_tuples(t) if i == 7][-2:] == [("-U", 7, "b7"), ("+U", 7, "c7")]


def test_no_column_is_decoded_twice_whenever_the_flush_comes(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(catalog, "t", buckets=4)
    _commit(t, _batch(list(range(4000)), "a"))
    clear_caches()
    seen = _decodes(monkeypatch)
    _commit(t, *[_batch(list(range(start, 4000, 50)), "b") for start in range(5)])  # at once: no wait
    decoded = [(name, column) for _, name, columns in seen for column in columns]
    assert decoded and len(decoded) == len(set(decoded))


def test_a_failed_read_ahead_leaves_the_flush_lookup_to_read_the_files(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t, reference = _table(catalog, "t"), _table(catalog, "ref", **{"lookup.cache-max-memory-size": "0"})
    base = _batch(list(range(1000)), "a")
    for table in (t, reference):
        _commit(table, base)
    clear_caches()
    original = CachedFileReader.read

    def failing(self: CachedFileReader, *args: Any) -> pa.Table:
        if threading.current_thread().name.startswith(THREAD):
            raise OSError("storage unavailable")
        return original(self, *args)

    monkeypatch.setattr(CachedFileReader, "read", failing)
    updates = [_batch(list(range(0, 1000, 3)), "b"), _batch(list(range(1, 1000, 5)), "c")]
    for table in (t, reference):
        _commit(table, *updates)
    assert change_tuples(t) == change_tuples(reference)
    assert rows(read(t), "id") == rows(read(reference), "id")


def test_without_a_lookup_cache_nothing_is_read_ahead(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(catalog, "t", **{"lookup.cache-max-memory-size": "0"})
    _commit(t, _batch(list(range(100)), "a"))
    seen = _decodes(monkeypatch)
    _commit(t, _batch(list(range(0, 100, 3)), "b"), _batch([5, 7], "c"))
    assert seen and not [s for s in seen if s[0].startswith(THREAD)]


@pytest.mark.parametrize("cache", ["48 kb", "4 kb"])  # the keys fit, the rest would not; nothing fits
def test_a_cache_too_small_for_a_file_gets_no_more_read_ahead_than_it_keeps(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch, cache: str) -> None:
    t = _table(catalog, "t", **{"lookup.cache-max-memory-size": cache})
    reference = _table(catalog, "ref", **{"lookup.cache-max-memory-size": "0"})
    base = _batch(list(range(3000)), "a-long-value-")
    for table in (t, reference):
        _commit(table, base)
    older = _older_files(t)
    clear_caches()
    seen = _decodes(monkeypatch)
    updates = [_batch(list(range(0, 3000, 3)), "b"), _batch(list(range(1, 3000, 3)), "c")]
    _commit(t, *updates, before_commit=_until(lambda: len(_columns_ahead(seen)) >= (len(older) if cache == "48 kb" else 1)))
    ahead = _columns_ahead(seen)
    assert all(columns == set(KEYS) for columns in ahead.values())  # never the other columns
    if cache == "4 kb":
        assert len(ahead) == 1  # the first file's keys did not stay in the cache: no more read ahead
    _commit(reference, *updates)
    assert change_tuples(t) == change_tuples(reference)


def test_a_composite_key_is_matched_by_its_rows(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = pa.schema([pa.field("region", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                        pa.field("v", pa.string())])
    t = create_table(catalog, "t", schema, ["region", "id"],
                     options={"bucket": "1", "changelog-producer": "lookup"})

    def batch(region: str, ids: list[int], prefix: str) -> pa.Table:
        return pa.table({"region": [region] * len(ids), "id": ids, "v": [f"{prefix}{i}" for i in ids]}, schema=schema)

    _commit(t, batch("eu", list(range(0, 1000, 2)), "a"))  # the even ids: the highest level
    _commit(t, batch("eu", list(range(1, 1000, 2)), "a"))  # the odd ids: the level below it
    older = _older_files(t)
    evens, odds = max(older, key=lambda n: older[n]), min(older, key=lambda n: older[n])
    clear_caches()
    seen = _decodes(monkeypatch)
    ids = list(range(0, 200, 2))  # both files' key ranges meet them; only the even file holds them
    _commit(t, batch("eu", ids[:50], "b"), batch("eu", ids[50:], "b"),
            before_commit=_until(lambda: set(_columns_ahead(seen).get(evens, ())) >= {"v"}))
    ahead = _columns_ahead(seen)
    assert ahead[evens] == {"region", "id", "_VALUE_KIND", "v", "_SEQUENCE_NUMBER"}
    assert ahead[odds] == {"region", "id", "_VALUE_KIND"}
    assert [(k, i, v) for _, k, i, v in change_tuples(t) if i == 8][-2:] == [("-U", 8, "a8"), ("+U", 8, "b8")]
