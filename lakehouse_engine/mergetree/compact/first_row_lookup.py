"""The first-row lookup of a compaction that takes level-0 rows up (Paimon's
LookupMergeTreeCompactRewriter with its FirstRowMergeFunctionWrapper).

Paimon reads the files above level 0 of a `merge-engine` = first-row table raw, without merging
(MergeTreeSplitGenerator, DataTableBatchScan): a key must sit in at most one file above level 0.
A key's first row is its earliest, so when a compaction takes level-0 rows up to level `n`, a
level-0 row whose key already lives in a level above `n` is a later row of that key and is
dropped. How, vectorised:

1. The distinct keys of the rewrite's level-0 files are read (key columns only, through the
   lookup cache).
2. They are looked up (`mergetree.lookup`, key-only: no value column is read) in the rewrite's own
   files above level 0, level by level, then in the bucket's levels above `n`, lowest first. A key
   found in the rewrite's own files merges with its level-0 rows there (Paimon's
   `containsHighLevel`: kept); a key found above `n` is dropped from what the rewrite writes.
3. A lone level-0 file none of whose keys is above `n` moves up as it is (Paimon rewrites it;
   the rows are the same).

Memory: the distinct keys of the rewrite's level-0 files and one file's key columns at a time.

The `+I` changelog of a `changelog-producer` = lookup table (`FirstRowChangelog`) comes out of the
same compaction, with no second lookup (Paimon's FirstRowMergeFunctionWrapper: +I for a level-0
record whose key no higher level holds): a writer's compaction takes all of level 0 up, so the rows
it keeps numbered at or above the first sequence number its changelog does not cover yet are
exactly its new keys' first rows. A key's older row (a level above, the bucket's files before the
writer, an earlier compaction's output) is numbered below those and wins the first-row merge; a key
above the output level is dropped. The writer's flush then looks nothing up
(`write.bucket_writer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.lookup import lookup, match_keys
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, cache_for
from lakehouse_engine.mergetree.merge_engines.ordering import INSERT
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND

if TYPE_CHECKING:
    from lakehouse_engine.mergetree.compact.levels import Levels
    from lakehouse_engine.mergetree.evolution import EvolvingFileReader
    from lakehouse_engine.schema import TableSchema

__all__ = ["FirstRowChangelog", "FirstRowLookup", "without_keys"]


class FirstRowLookup:
    """Which level-0 keys of a first-row compaction into `output_level` already live above it."""

    def __init__(self, schema: TableSchema, table_path: str, bucket_dir: str, reader: EvolvingFileReader,
                 levels: Levels, output_level: int):
        """`levels`: the bucket's files before the compaction; `reader`: reads its data files."""
        self.key_names = schema.trimmed_primary_keys
        self.key_types = schema.types_of(self.key_names)
        file_schema = schema.data_file_arrow_schema()
        self.key_schema = pa.schema([file_schema.field(k) for k in self.key_names])
        self.bucket_dir = bucket_dir
        self.reader = CachedFileReader(reader, cache_for(table_path, schema.core_options))
        upper: dict[int, list[DataFileMeta]] = {}
        for f in levels.all_files():
            if f.level > output_level:
                upper.setdefault(f.level, []).append(f)
        #: The bucket's levels above the output level, lowest first (each a key-disjoint run).
        self.above = [upper[level] for level in sorted(upper)]
        self._above_names = {f.file_name for run in self.above for f in run}
        # (A lone level-0 file is asked twice: whether to move it, then what its rewrite drops.)
        self._asked: dict[tuple[str, ...], pa.Table | None] = {}

    def held_keys(self, keys: pa.Table, files: Sequence[DataFileMeta]) -> pa.Table | None:
        """Those of the distinct `keys` that one of `files` (above level 0) holds; None when none does."""
        runs: dict[int, list[DataFileMeta]] = {}
        for f in files:
            runs.setdefault(f.level, []).append(f)
        found = lookup(keys, [runs[level] for level in sorted(runs)], lambda f, _cols: self._keys(f),
                       self.key_names, self.key_schema, self._range, comparable_key)
        return keys.take(pa.array(found.key_index)) if len(found.key_index) else None

    def dropped_keys(self, files: Sequence[DataFileMeta]) -> pa.Table | None:
        """The keys of `files`' level-0 rows that live above the output level (to drop from their
        rewrite); None when there are none."""
        level0 = [f for f in files if f.level == 0]
        if not level0 or not self.above:
            return None
        asked = tuple(sorted(f.file_name for f in files))
        if asked not in self._asked:
            self._asked[asked] = self._dropped(files, level0)
        return self._asked[asked]

    def _dropped(self, files: Sequence[DataFileMeta], level0: list[DataFileMeta]) -> pa.Table | None:
        keys = _distinct(pa.concat_tables([self._keys(f) for f in level0]), self.key_names)
        own: dict[int, list[DataFileMeta]] = {}
        for f in files:
            if f.level > 0:
                own.setdefault(f.level, []).append(f)
        searched = [own[level] for level in sorted(own)] + self.above
        found = lookup(keys, searched, lambda f, _cols: self._keys(f), self.key_names, self.key_schema,
                       self._range, comparable_key)
        if not len(found.key_index):
            return None
        above = np.array([name in self._above_names for name in found.files], dtype=bool)[found.file_index]
        if not above.any():
            return None
        return keys.take(pa.array(found.key_index[above]))

    def _keys(self, f: DataFileMeta) -> pa.Table:
        return self.reader.read(f"{self.bucket_dir}/{f.file_name}", self.key_names, self.key_schema, f)

    def _range(self, f: DataFileMeta) -> tuple[Any, Any]:
        return (comparable_key(deserialize_row(f.min_key, self.key_types)),
                comparable_key(deserialize_row(f.max_key, self.key_types)))


class FirstRowChangelog:
    """The `+I` changelog of a first-row compaction that takes a writer's level 0 up: the rows it
    keeps numbered from `first_sequence` on (the writer's rows no changelog covers yet), but those
    of a key one of the compaction's files above level 0 holds (Paimon's `containsHighLevel`).

    (Writers number their rows apart: a write-only writer's level-0 file can be numbered below
    rows already above level 0, so `first_sequence`, the lowest number in level 0, may reach rows
    of those files, whose keys gave their `+I` when they went up. The committer renumbers a
    level-0 file above the files that share its keys, so a key's own level-0 rows stay newer.)"""

    def __init__(self, first_sequence: int, reader: CachedFileReader, bucket_dir: str, read_schema: pa.Schema,
                 upper: Sequence[DataFileMeta] = (), lookup: FirstRowLookup | None = None):
        """`reader`/`read_schema`: read a level-0 file the compaction moves up without rewriting;
        `upper`: the compaction's files above level 0, whose keys `lookup` finds."""
        self.first_sequence = first_sequence
        self._reader = reader
        self._bucket_dir = bucket_dir
        self._read_schema = read_schema
        self._parts: list[pa.Table] = []
        # Only rows numbered at or below the top of `upper` can be one of its rows.
        self._upper = list(upper) if lookup is not None else []
        self._upper_top = max((f.max_sequence_number for f in self._upper), default=-1)
        self._lookup = lookup

    def kept(self, rows: pa.Table) -> pa.Table:
        """Take note of merged rows the compaction writes (key ranges in key order); returns them."""
        if rows.num_rows:
            seq = rows.column(SEQUENCE_NUMBER).combine_chunks().to_numpy(zero_copy_only=False)
            new = seq >= self.first_sequence
            if new.any():
                self._parts.append(rows if new.all() else rows.filter(pa.array(new)))
        return rows

    def moved(self, f: DataFileMeta) -> None:
        """Take note of a level-0 file moved up as it is (none of its keys is elsewhere)."""
        if f.level == 0 and f.max_sequence_number >= self.first_sequence:
            self.kept(self._reader.read(f"{self._bucket_dir}/{f.file_name}", self._read_schema.names,
                                        self._read_schema, f))

    def rows(self) -> pa.Table | None:
        """The changelog, sorted by key, every row `+I`; None when no key is new."""
        if not self._parts:
            return None
        rows = pa.concat_tables(self._parts) if len(self._parts) > 1 else self._parts[0]
        if self.first_sequence <= self._upper_top:
            rows = self._without_upper_keys(rows)
            if not rows.num_rows:
                return None
        kind = rows.schema.get_field_index(VALUE_KIND)
        return rows.set_column(kind, rows.schema.field(kind), pa.array(np.full(rows.num_rows, INSERT, np.int8)))


    def _without_upper_keys(self, rows: pa.Table) -> pa.Table:
        """`rows` without those whose key a file of `upper` holds (only rows numbered within its
        range are asked: the others are level-0 rows)."""
        assert self._lookup is not None
        seq = rows.column(SEQUENCE_NUMBER).combine_chunks().to_numpy(zero_copy_only=False)
        maybe = seq <= self._upper_top
        if not maybe.any():
            return rows
        key_names = self._lookup.key_names
        asked = rows.filter(pa.array(maybe)).select(key_names)
        held = self._lookup.held_keys(_distinct(asked.cast(self._lookup.key_schema), key_names), self._upper)
        return rows if held is None else without_keys(rows, held, key_names)


def without_keys(rows: pa.Table, keys: pa.Table, key_names: Sequence[str]) -> pa.Table:
    """`rows` without those whose key is one of the (distinct) `keys`."""
    if not rows.num_rows or not keys.num_rows:
        return rows
    code = match_keys(keys, rows.select(list(key_names)), list(key_names))
    keep = code < 0
    return rows if keep.all() else rows.filter(pa.array(keep))


def _distinct(keys: pa.Table, key_names: list[str]) -> pa.Table:
    """The distinct rows of `keys` (level-0 runs of several flushes may hold a key each)."""
    if len(key_names) == 1:
        column = keys.column(key_names[0])
        return pa.table({key_names[0]: pc.unique(column)}, schema=keys.schema)
    return keys.group_by(key_names, use_threads=False).aggregate([]).select(key_names).cast(keys.schema)
