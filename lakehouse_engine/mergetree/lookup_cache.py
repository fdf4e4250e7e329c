"""The lookup cache: decoded columns of data files, kept in this process between commits.

The lookup at commit (`mergetree.lookup`: the `lookup` changelog producer, deletion vectors) reads
the key column, and for the keys it finds the rows, of a bucket's older files. A streaming writer
commits again and again into the same buckets, so Paimon keeps a local lookup file per data file
between commits (`lookup.cache-max-memory-size`, `lookup.cache-max-disk-size`,
`lookup.cache-file-retention`). This is that cache, in memory, in Arrow:

* Keyed by the data file's path and the schema id the columns were read as: a data file is never
  changed once written (a compaction writes new files under new names, an upgrade keeps the
  file), so an entry is never stale. A file a compaction or expiry removed is simply no longer
  asked for; its entry ages out.
* Filled by a writer with the rows of a level-0 run it just wrote (no decode at all), and by every
  lookup read (the next commit's lookup of the same file decodes nothing).
* Bounded: at most `lookup.cache-max-memory-size` bytes of decoded columns per table (least
  recently used first out; 0 turns the cache off), and all tables' caches of the process together
  at most the largest of their bounds; an entry not used for `lookup.cache-file-retention` is
  dropped. The cache never spills to disk, so it uses none of `lookup.cache-max-disk-size`.

The caches live in a process-wide registry, one per table location (`cache_for`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.evolution import EvolvingFileReader
from lakehouse_engine.options import (
    LOOKUP_CACHE_FILE_RETENTION,
    LOOKUP_CACHE_MAX_MEMORY_SIZE,
    CoreOptions,
)

__all__ = ["CachedFileReader", "LookupCache", "cache_for", "clear_caches"]


@dataclass
class _Entry:
    """The cached columns of one data file (as one schema version reads them)."""

    columns: dict[str, pa.ChunkedArray] = field(default_factory=dict)
    nbytes: int = 0
    used: float = 0.0


class LookupCache:
    """Decoded columns of data files, least recently used out past `max_bytes`, an entry not used
    for `retention_s` seconds dropped (see the module docstring). Thread-safe."""

    def __init__(self, max_bytes: int, retention_s: float, clock: Callable[[], float] = time.monotonic,
                 on_grow: Callable[[], None] | None = None):
        """`on_grow`: called (outside this cache's lock) after a put grew the cache."""
        self.max_bytes = max_bytes
        self.retention_s = retention_s
        self._clock = clock
        self._on_grow = on_grow
        self._entries: OrderedDict[tuple[str, int], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    def resize(self, max_bytes: int, retention_s: float) -> None:
        """New bounds (a table's options changed); entries past them go at once."""
        with self._lock:
            self.max_bytes, self.retention_s = max_bytes, retention_s
            self._evict()

    def get(self, path: str, schema_id: int, schema: pa.Schema) -> pa.Table | None:
        """The columns of `schema` of the file at `path` read as schema `schema_id`, None unless
        every one of them is cached with exactly that type."""
        with self._lock:
            self._expire()
            entry = self._entries.get((path, schema_id))
            if entry is None or any(c not in entry.columns or entry.columns[c].type != schema.field(c).type
                                    for c in schema.names):
                self.misses += 1
                return None
            entry.used = self._clock()
            self._entries.move_to_end((path, schema_id))
            self.hits += 1
            return pa.Table.from_arrays([entry.columns[c] for c in schema.names], schema=schema)

    def cached_columns(self, path: str, schema_id: int, schema: pa.Schema) -> dict[str, pa.ChunkedArray]:
        """Those columns of `schema` cached for the file at `path` (read as schema `schema_id`)
        with exactly their type: a read of more columns decodes only the others."""
        with self._lock:
            entry = self._entries.get((path, schema_id))
            if entry is None:
                return {}
            return {c: entry.columns[c] for c in schema.names
                    if c in entry.columns and entry.columns[c].type == schema.field(c).type}

    def put(self, path: str, schema_id: int, table: pa.Table) -> None:
        """Cache the columns of `table` (the whole file's rows, in file order) for `path`."""
        if self.max_bytes <= 0:
            return
        with self._lock:
            key = (path, schema_id)
            entry = self._entries.pop(key, None) or _Entry()
            self.nbytes -= entry.nbytes
            for name, column in zip(table.column_names, table.columns, strict=True):
                entry.columns[name] = column
            entry.nbytes = sum(c.nbytes for c in entry.columns.values())
            entry.used = self._clock()
            if entry.nbytes > self.max_bytes:
                return  # one file larger than the whole cache: not kept
            self._entries[key] = entry
            self.nbytes += entry.nbytes
            self._evict()
        if self._on_grow is not None:
            self._on_grow()

    def oldest_use(self) -> float | None:
        """When the least recently used entry was last used (None: empty)."""
        with self._lock:
            self._expire()
            return next(iter(self._entries.values())).used if self._entries else None

    def drop_oldest(self) -> None:
        """Drop the least recently used entry."""
        with self._lock:
            if self._entries:
                self._drop(next(iter(self._entries)))

    def files(self) -> list[str]:
        """The paths cached, least recently used first."""
        with self._lock:
            return [path for path, _ in self._entries]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def _expire(self) -> None:
        deadline = self._clock() - self.retention_s
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if entry.used >= deadline:
                break
            self._drop(key)

    def _evict(self) -> None:
        self._expire()
        while self.nbytes > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[str, int]) -> None:
        entry = self._entries.pop(key)
        self.nbytes -= entry.nbytes


_CACHES: dict[str, LookupCache] = {}
_REGISTRY_LOCK = threading.Lock()


def _trim_process() -> None:
    """All tables' caches together stay within the largest table's bound: past it, the least
    recently used entry of any table goes (a process touching many tables holds no more than
    one table may)."""
    with _REGISTRY_LOCK:
        caches = list(_CACHES.values())
        if not caches:
            return
        bound = max(c.max_bytes for c in caches)
        while sum(c.nbytes for c in caches) > bound:
            used = [(c.oldest_use(), i) for i, c in enumerate(caches)]
            oldest = min(((u, i) for u, i in used if u is not None), default=None)
            if oldest is None:
                return
            caches[oldest[1]].drop_oldest()


def cache_for(table_path: str, options: CoreOptions) -> LookupCache | None:
    """This process's lookup cache of the table at `table_path`, bounded by its `options`
    (None when `lookup.cache-max-memory-size` is 0)."""
    max_bytes = options.require(LOOKUP_CACHE_MAX_MEMORY_SIZE)
    retention_s = options.require(LOOKUP_CACHE_FILE_RETENTION) / 1000.0
    with _REGISTRY_LOCK:
        cache = _CACHES.get(table_path)
        if max_bytes <= 0:
            if cache is not None:
                cache.clear()
                del _CACHES[table_path]
            return None
        if cache is None:
            cache = _CACHES[table_path] = LookupCache(max_bytes, retention_s, on_grow=_trim_process)
        elif (cache.max_bytes, cache.retention_s) != (max_bytes, retention_s):
            cache.resize(max_bytes, retention_s)
        return cache


def clear_caches(table_paths: Sequence[str] | None = None) -> None:
    """Drop the lookup caches of `table_paths` (every table's when None): the next lookup reads
    the files again (what a fresh process does)."""
    with _REGISTRY_LOCK:
        for path in list(_CACHES) if table_paths is None else list(table_paths):
            cache = _CACHES.pop(path, None)
            if cache is not None:
                cache.clear()


class CachedFileReader:
    """Reads columns of data files through a lookup cache (a plain read without one)."""

    def __init__(self, reader: EvolvingFileReader, cache: LookupCache | None):
        self.reader = reader
        self.cache = cache
        self.schema_id = reader.schema.id

    def read(self, path: str, columns: Sequence[str], read_schema: pa.Schema, meta: DataFileMeta) -> pa.Table:
        """Columns `columns` of the file at `path` typed as `read_schema` (see EvolvingFileReader.read)."""
        if self.cache is None:
            return self.reader.read(path, columns, read_schema, meta)
        cached = self.cache.get(path, self.schema_id, read_schema)
        if cached is not None and cached.num_rows == meta.row_count:
            return cached
        have = {} if list(columns) != read_schema.names else {
            c: v for c, v in self.cache.cached_columns(path, self.schema_id, read_schema).items()
            if len(v) == meta.row_count}
        if not have:
            rows = self.reader.read(path, columns, read_schema, meta)
            self.cache.put(path, self.schema_id, rows)
            return rows
        # Only the columns not cached are decoded (a lookup reads the keys first, then the rest).
        missing = [c for c in columns if c not in have]
        rows = self.reader.read(path, missing, pa.schema([read_schema.field(c) for c in missing]), meta)
        self.cache.put(path, self.schema_id, rows)
        return pa.Table.from_arrays([have[c] if c in have else rows.column(c) for c in columns],
                                    schema=read_schema)

    def put_written(self, path: str, rows: pa.Table) -> None:
        """Cache the rows of a file this process just wrote (in the reader's schema)."""
        if self.cache is not None:
            self.cache.put(path, self.schema_id, rows)
