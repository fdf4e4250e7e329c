"""The read-ahead of the lookup at commit: a writer decodes the older files of each bucket it writes
into the lookup cache on a background thread while it still takes rows.

A fresh process's first commit (and a commit after a compaction wrote new files) looks its keys up
in files its lookup cache does not hold yet: the decode of those files is most of what a cold
lookup costs. Rows reach a writer over time (a stream's records between two checkpoints, a batch
job's batches), and the decode needs nothing but the older files and the keys written: done while
the rows come in, it leaves the commit a warm lookup.

Two shapes, one per lookup:

* **Deletion vectors** (`for_deletion_vectors`): the key columns of the older files above level 0;
  the DV compaction at commit matches keys and reads nothing else of the older files.
* **The `lookup` changelog** (`for_lookup_changelog`): the key columns and `_VALUE_KIND` of every
  older file (its flush lookup's first read), and of a file holding a written key, its other
  columns (the before-images' `-U` rows take them). Files are visited as the lookup searches them
  (level-0 runs newest first, then levels 1, 2, ...); on a table whose newest record of a key is
  its row, a key found in a newer file is not sought in the older ones, as the lookup does.
  Whether a file holds a written key is asked of a sample of the written keys (at most
  `SAMPLE_KEYS` of those written since the bucket's last read-ahead, evenly spaced): the written keys come in arrival order, and matching them all
  would cost the read-ahead several times the flush lookup's match of the sorted run. A key of
  the sample held by a file is one the lookup finds there, so no file is read that the lookup
  does not read; a file holding only keys outside the sample is left to the lookup.

Only the files the lookup will read: those whose key range meets the written keys (compared on the
first key field; every file for FLOAT/DOUBLE keys, as the lookup). Only a cache warm-up: files are
immutable (an entry is never stale), a file that changed or vanished meanwhile is read by the
lookup itself, and any error here is dropped (the lookup's own read raises it). The lookup of a
bucket waits for that bucket's reads (`wait`), so no file is decoded twice; the flush lookup of
the changelog takes over those not started yet (it reads them itself on its own thread, instead of
waiting behind other buckets' reads).
Memory: the decoded columns live in the lookup cache, bounded by `lookup.cache-max-memory-size`;
the other columns of a file are read ahead only while, with what was read ahead and not yet
looked up, they stay within half of it (a file taken to decode to four times its stored size),
and nothing more is read ahead once a file read ahead did not stay in the cache (the lookup
would decode it again). Without a lookup cache (`lookup.cache-max-memory-size` 0) nothing is read.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.key_range import files_meeting_keys
from lakehouse_engine.mergetree.lookup import ascending_integer_keys, integer_keys, keys_held
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, cache_for
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND

if TYPE_CHECKING:
    from lakehouse_engine.partition import Partition
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["LookupPrefetch"]


class LookupPrefetch:
    """Reads the older files a bucket's lookup at commit will read into the lookup cache on a
    background thread, while the writer still takes rows (see the module docstring)."""

    def __init__(self, table: FileStore, first_read: Sequence[str], rest: Sequence[str] = (),
                 above_level0_only: bool = False, newest_wins: bool = True, takes_over: bool = False,
                 thread_name: str = "lookup-prefetch"):
        """`first_read`: the columns read of every file (the key columns first); `rest`: those read
        too of a file holding a written key (none: keys only); `above_level0_only`: level-0 files
        are not read; `newest_wins`: a key found in a newer file is not sought in older ones;
        `takes_over`: `wait` drops the reads not started yet instead of waiting for them."""
        self.table = table
        schema = table.schema
        self._cache = cache_for(table.path_factory.table_path, schema.core_options)
        self._key_names = list(schema.trimmed_primary_keys)
        self._key_types = schema.types_of(self._key_names)
        file_schema = schema.data_file_arrow_schema()
        self._first = list(first_read)
        self._first_schema = pa.schema([file_schema.field(c) for c in self._first])
        self._all = self._first + [c for c in rest if c not in self._first]
        self._all_schema = pa.schema([file_schema.field(c) for c in self._all])
        self._rest = len(self._all) > len(self._first)
        self._above_level0_only = above_level0_only
        self._newest_wins = newest_wins
        self._takes_over = takes_over
        self._thread_name = thread_name
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[tuple[bytes, int], list[Future[None]]] = {}
        #: Per bucket, the files whose first columns were asked for, and those whose others were.
        self._asked: dict[tuple[bytes, int], set[str]] = {}
        self._asked_rest: dict[tuple[bytes, int], set[str]] = {}
        #: Decoded bytes read ahead and not yet looked up (`wait` forgets a bucket's).
        self._ahead: dict[tuple[bytes, int], int] = {}
        #: Per bucket, the files and keys given since its last read began (the next read takes
        #: them all), and whether a read of it waits to begin (a later write only adds to them).
        self._files: dict[tuple[bytes, int], dict[str, DataFileMeta]] = {}
        self._keys: dict[tuple[bytes, int], list[pa.Table]] = {}
        self._queued: set[tuple[bytes, int]] = set()
        #: A file read ahead did not stay in the cache: this writer reads nothing more ahead.
        self._overflowed = False
        self._lock = threading.Lock()

    @classmethod
    def for_deletion_vectors(cls, table: FileStore) -> LookupPrefetch:
        """The read-ahead of a DV table's compaction at commit: the keys of the files above level 0."""
        return cls(table, table.schema.trimmed_primary_keys, above_level0_only=True,
                   thread_name="dv-lookup-prefetch")

    @classmethod
    def for_lookup_changelog(cls, table: FileStore, newest_wins: bool) -> LookupPrefetch:
        """The read-ahead of a `lookup` changelog writer's flush lookup: every older file's keys
        and `_VALUE_KIND`, and the other columns of those holding a written key (`newest_wins`:
        the table's newest record of a key is its row, so the lookup stops at the newest file)."""
        schema = table.schema
        return cls(table, list(schema.trimmed_primary_keys) + [VALUE_KIND],
                   schema.field_names + [SEQUENCE_NUMBER, VALUE_KIND], newest_wins=newest_wins,
                   takes_over=True, thread_name="changelog-lookup-prefetch")

    def start(self, partition: Partition, bucket: int, files: Sequence[DataFileMeta], rows: pa.Table) -> None:
        """Begin reading what the bucket's lookup will read of its `files` for `rows` (written
        into the bucket, with the table's key columns)."""
        if self._cache is None or rows.num_rows == 0 or self._overflowed:
            return
        key = (partition.binary, bucket)
        asked, asked_rest = self._asked.setdefault(key, set()), self._asked_rest.setdefault(key, set())
        wanted = [f for f in files if not (self._above_level0_only and f.level == 0)
                  and (f.file_name not in asked or (self._rest and f.file_name not in asked_rest))]
        bucket_dir = self.table.path_factory.bucket_dir(partition.spec, bucket)
        # A file the cache holds all of (a warm writer's) is not read again.
        whole = {f.file_name for f in wanted if self._cached(f"{bucket_dir}/{f.file_name}", self._all_schema)}
        asked.update(whole)
        asked_rest.update(whole)
        wanted = [f for f in wanted if f.file_name not in whole]
        with self._lock:
            # The keys go to the bucket's read still to begin, or to the one these files start;
            # a warm writer's bucket has neither (nothing to read): no sample taken.
            if self._rest and (wanted or key in self._queued):
                self._keys.setdefault(key, []).append(_sample(rows.select(self._key_names)))
        if not wanted:
            return
        # (With the other columns, files already read are matched again, from the cache: a key
        # a newer one holds is sought no further.)
        meeting = [f for f in files if not (self._above_level0_only and f.level == 0)] if self._rest else wanted
        # A warm-up never fails a write: on any error every file is read (the lookup reports it).
        with contextlib.suppress(Exception):
            bounds = pc.min_max(rows.column(self._key_names[0]))
            first = ((bounds["min"].as_py(),), (bounds["max"].as_py(),))
            meeting = files_meeting_keys(meeting, self._key_types, first)
        names = {f.file_name for f in meeting}
        wanted = [f for f in wanted if f.file_name in names]
        if not wanted:
            return
        asked.update(f.file_name for f in wanted)
        wanted = meeting
        with self._lock:
            self._files.setdefault(key, {}).update((f.file_name, f) for f in wanted)
            if key in self._queued:
                return  # the bucket's read still to begin takes these files and keys too
            self._queued.add(key)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        self._pending.setdefault(key, []).append(self._pool.submit(self._read, key, bucket_dir))

    def _read(self, key: tuple[bytes, int], bucket_dir: str) -> None:
        with self._lock:
            self._queued.discard(key)
            given = self._files.pop(key, {})
            written = self._keys.pop(key, [])
            done = set(self._asked_rest.get(key, ()))
        files = _in_lookup_order(list(given.values()))
        reader = CachedFileReader(self.table.file_reader(for_rewrite=True), self._cache)
        sought: _Sought | None = None
        with contextlib.suppress(Exception):
            sought = _Sought(_sample(pa.concat_tables(written)), self._key_names) if written else None
        for f in files:
            path = f"{bucket_dir}/{f.file_name}"
            if self._overflowed:
                return
            with contextlib.suppress(Exception):
                first = reader.read(path, self._first, self._first_schema, f)
                if not self._cached(path, self._first_schema):
                    self._overflowed = True  # (see below)
                    return
                if sought is None or not sought.held_in(first, narrow=self._newest_wins):
                    continue
                if f.file_name not in done and self._room(f):
                    with self._lock:
                        self._asked_rest.setdefault(key, set()).add(f.file_name)
                    rows = reader.read(path, self._all, self._all_schema, f)
                    with self._lock:
                        self._ahead[key] = self._ahead.get(key, 0) + rows.nbytes
                    if not self._cached(path, self._all_schema):
                        # The cache could not keep it (larger than it, or pushed out): the
                        # lookup would decode it again, so this writer reads nothing more ahead.
                        self._overflowed = True

    def _cached(self, path: str, schema: pa.Schema) -> bool:
        """Whether the lookup cache holds every column of `schema` of the file at `path`."""
        assert self._cache is not None
        return len(self._cache.cached_columns(path, self.table.schema.id, schema)) == len(schema)

    def _room(self, f: DataFileMeta) -> bool:
        """Whether the columns of `f`, with what was read ahead and not looked up yet, stay
        within half the cache (`f` decoded taken as `_EXPANSION` times its stored size), and no
        file read ahead overflowed it."""
        assert self._cache is not None
        with self._lock:
            ahead = sum(self._ahead.values())
            return not self._overflowed and ahead + f.file_size * _EXPANSION <= self._cache.max_bytes // 2

    def wait(self, partition: Partition, bucket: int) -> None:
        """Before the bucket's lookup: wait for its reads (with `takes_over`, only those in
        progress: the others are dropped, the lookup reads those files itself), so no file is
        decoded twice."""
        key = (partition.binary, bucket)
        for pending in self._pending.pop(key, []):
            if self._takes_over and pending.cancel():
                continue
            with contextlib.suppress(Exception):
                pending.result()
        self._asked.pop(key, None)
        self._asked_rest.pop(key, None)
        with self._lock:
            self._ahead.pop(key, None)
            self._files.pop(key, None)
            self._keys.pop(key, None)
            self._queued.discard(key)

    def close(self) -> None:
        """Wait for every read and stop the thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._pending.clear()
        self._asked.clear()
        self._asked_rest.clear()
        self._ahead.clear()
        self._files.clear()
        self._keys.clear()
        self._queued.clear()


def _in_lookup_order(files: list[DataFileMeta]) -> list[DataFileMeta]:
    """`files` in the order the lookup searches them: level-0 runs newest first, then by level."""
    level0 = sorted((f for f in files if f.level == 0),
                    key=lambda f: (f.max_sequence_number, f.min_sequence_number), reverse=True)
    return level0 + sorted((f for f in files if f.level > 0), key=lambda f: f.level)


#: How many times its stored size a data file is taken to decode to, for the read-ahead's bound
#: (zstd-compressed parquet of plain columns decodes to two to three times its size).
_EXPANSION = 4

#: The most written keys a read-ahead matches against the older files.
SAMPLE_KEYS = 4096


def _sample(keys: pa.Table) -> pa.Table:
    """At most `SAMPLE_KEYS` of `keys`, evenly spaced."""
    if keys.num_rows <= SAMPLE_KEYS:
        return keys
    step = -(-keys.num_rows // SAMPLE_KEYS)
    return keys.take(pa.array(np.arange(0, keys.num_rows, step, dtype=np.int64)))


class _Sought:
    """The written keys a read-ahead seeks, file after file: one integer-like key column as sorted
    distinct int64 values (a binary search of them among a file's ascending keys), else the
    distinct key rows (`keys_held`)."""

    def __init__(self, keys: pa.Table, key_names: list[str]):
        self.key_names = key_names
        values = integer_keys(keys.column(key_names[0])) if len(key_names) == 1 else None
        self.ints = np.unique(values) if values is not None else None
        self.rows = _distinct(keys, key_names) if self.ints is None else None

    def held_in(self, file_keys: pa.Table, narrow: bool) -> bool:
        """Whether the file whose key columns are `file_keys` holds a key sought; with `narrow`,
        the keys it holds are sought no further."""
        if self.ints is not None:
            if len(self.ints) == 0:
                return False
            ascending = ascending_integer_keys(file_keys.column(self.key_names[0]))
            if ascending is None:
                return True  # (not a sorted data file: read it, seek on)
            if len(ascending) == 0:
                return False
            at = np.minimum(np.searchsorted(ascending, self.ints), len(ascending) - 1)
            held = ascending[at] == self.ints
            if narrow:
                self.ints = self.ints[~held]
            return bool(held.any())
        assert self.rows is not None
        if self.rows.num_rows == 0:
            return False
        held = keys_held(self.rows, file_keys, self.key_names)
        if narrow:
            self.rows = self.rows.filter(pa.array(~held))
        return bool(held.any())


def _distinct(keys: pa.Table, key_names: list[str]) -> pa.Table:
    """The distinct rows of the key columns `keys` (what the lookup's match takes)."""
    if len(key_names) == 1:
        return pa.table({key_names[0]: pc.unique(keys.column(key_names[0]))})
    return keys.group_by(key_names, use_threads=False).aggregate([]).select(key_names)
