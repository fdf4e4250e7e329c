"""Deletion vectors maintained by writes and compactions (`deletion-vectors.enabled`).

A DV table's level 0 is invisible to its readers, so every commit compacts its level-0 files up,
as Paimon's lookup compaction does (`ForceUpLevel0Compaction` with `LookupMergeTreeCompactRewriter`):

1. The unit: what Paimon's universal compaction picks when it takes all of level 0; else all
   level-0 files of the bucket and, when level 1 holds files, the level-1 files whose key range
   meets the level-0 keys (a level is one sorted run). The output level is then the level below
   the lowest non-empty one (level 1 when level 1 is in the unit, the highest level when the
   bucket holds nothing above level 0). A full compaction takes every file.
2. The keys of the unit are looked up in the levels above it (`mergetree.lookup`, rows already
   marked skipped): each key found there has its old row merged with the unit's rows (so
   partial-update and aggregation see it) and its position marked in that file's vector.
3. The unit's rows (files above level 0 read with their vectors applied) are merged, retractions
   dropped (every older version of their keys is marked), and written at the output level. A lone
   level-0 file of a deduplicate table is moved up without a rewrite when nothing in it retracts.
4. The bucket's vectors (the old ones of files that stay, OR the new marks; none for files the unit
   removed) are written as new index files that replace all of the bucket's old ones.
5. A `lookup` changelog table's compaction gives the changelog of the level-0 files it takes up
   (those no flush of its writer looked up already), against the files above level 0 with their
   vectors applied (`write.level0_changelog`): the rows become visible with their changelog.

What the commit checks (`write.commit_planners.check_deletion_vector_base`): the bucket's files
above level 0 and its vector index files are what this compaction saw, else the vectors would be
stale (a mark lost or applied to a rewritten file); the committer then recomputes the compaction
against what landed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.deletion_vectors import DELETION_VECTORS_INDEX, DeletionFile
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.compact.levels import Levels
from lakehouse_engine.mergetree.compact.rewriter import Level0ChangelogWriter
from lakehouse_engine.mergetree.compact.universal import pick_unit
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_COMPACT, DataFileWriter
from lakehouse_engine.mergetree.data_file_check import checked_batches
from lakehouse_engine.mergetree.deletion_vector_files import write_deletion_vector_files
from lakehouse_engine.mergetree.key_range import files_meeting_keys, key_span
from lakehouse_engine.mergetree.lookup import lookup, match_keys
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, cache_for
from lakehouse_engine.mergetree.range_merge import merge_budget, range_merge
from lakehouse_engine.mergetree.rolling_writer import RollingRunWriter
from lakehouse_engine.options import DELETION_VECTOR_INDEX_FILE_TARGET_SIZE, MERGE_ENGINE
from lakehouse_engine.read.deletion_vectors import (
    DeletionVectorReader,
    deletion_vectors_enabled,
    snapshot_deletion_files,
)
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.threads import cores

if TYPE_CHECKING:
    from lakehouse_engine.partition import Partition
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["DeletionVectorBase", "DeletionVectorCompaction", "DeletionVectorCompactor",
           "deletion_vectors_enabled"]


@dataclass
class DeletionVectorBase:
    """What a bucket held when its vectors were computed: its vector index files and its files above
    level 0 (the commit checks both are unchanged), and each data file's vector."""

    index_files: list[str] = field(default_factory=list)
    upper_files: list[str] = field(default_factory=list)
    vectors: dict[str, DeletionFile] = field(default_factory=dict)

    @staticmethod
    def of_snapshot(table: FileStore, snapshot: Snapshot | None) -> dict[tuple[bytes, int], DeletionVectorBase]:
        """(partition, bucket) -> its base at `snapshot` (buckets with vectors or files above level 0)."""
        out: dict[tuple[bytes, int], DeletionVectorBase] = {}
        if snapshot is None:
            return out
        mio = table.manifest_io()
        for ie in mio.index_entries(snapshot):
            if ie.index_type == DELETION_VECTORS_INDEX:
                out.setdefault((ie.partition, ie.bucket), DeletionVectorBase()).index_files.append(ie.file_name)
        for key, files in snapshot_deletion_files(table, snapshot).items():
            out.setdefault(key, DeletionVectorBase()).vectors = files
        for e in mio.live_entries(snapshot):
            if e.file.level > 0:
                out.setdefault((e.partition, e.bucket), DeletionVectorBase()).upper_files.append(e.file.file_name)
        for base in out.values():
            base.index_files.sort()
            base.upper_files.sort()
        return out


@dataclass
class DeletionVectorCompaction:
    """One bucket's compaction: files before and after, and its new vector index files."""

    before: list[DataFileMeta]
    after: list[DataFileMeta]
    index_files: list[IndexManifestEntry]
    #: The `lookup` changelog of the level-0 files it took up.
    changelog_files: list[DataFileMeta] = field(default_factory=list)


class DeletionVectorCompactor:
    """Compacts one bucket of a DV table and maintains its vectors (see the module docstring)."""

    def __init__(self, table: FileStore, partition: Partition, bucket: int, base: DeletionVectorBase,
                 known_keys: dict[str, pa.Table] | None = None,
                 level0_changelog: Level0ChangelogWriter | None = None):
        """`known_keys`: the key columns of level-0 files the caller still holds (not read again);
        `level0_changelog`: a `lookup` table's, which gives the changelog of level-0 files taken up."""
        self.table = table
        self.level0_changelog = level0_changelog
        self.known_keys = known_keys or {}
        schema = table.schema
        opts = schema.core_options
        self.partition = partition
        self.bucket = bucket
        self.base = base
        self.key_names = schema.trimmed_primary_keys
        self.key_types = schema.types_of(self.key_names)
        self.columns = schema.field_names + [SEQUENCE_NUMBER, VALUE_KIND]
        file_schema = schema.data_file_arrow_schema()
        self.read_schema = pa.schema([file_schema.field(c) for c in self.columns])
        self.merge_function = table.merge_function()
        self.reader = table.file_reader(for_rewrite=True)
        # The lookup reads through this process's lookup cache (the runs it wrote, files it read).
        self.cached = CachedFileReader(self.reader, cache_for(table.path_factory.table_path, opts))
        self.vectors = DeletionVectorReader(table.file_io)
        self.bucket_dir = table.path_factory.bucket_dir(partition.spec, bucket)
        self.target_file_size = opts.target_file_size(True)
        self.index_target_size = opts.require(DELETION_VECTOR_INDEX_FILE_TARGET_SIZE)
        self.num_levels = opts.num_levels
        self.budget = merge_budget(opts)
        self.options = opts
        # A lone level-0 file may move up unrewritten only where the newest record always wins.
        self.may_upgrade = opts.require(MERGE_ENGINE) == "deduplicate" and not opts.sequence_fields

    # ---- reading ------------------------------------------------------------------------
    def _read(self, f: DataFileMeta, columns: list[str] | None = None) -> pa.Table:
        cols = columns or self.columns
        schema = pa.schema([self.read_schema.field(c) for c in cols])
        return self.cached.read(f"{self.bucket_dir}/{f.file_name}", cols, schema, f)

    def _live(self, f: DataFileMeta, rows: pa.Table | None = None) -> np.ndarray | None:
        """The rows of `f` its vector does not mark (None: no vector)."""
        deletion = self.base.vectors.get(f.file_name)
        if deletion is None:
            return None
        return self.vectors.keep_mask(deletion, f.row_count)

    def _key(self, binary: bytes) -> Any:
        return comparable_key(deserialize_row(binary, self.key_types))

    # ---- the compaction -----------------------------------------------------------------
    def compact(self, files: Sequence[DataFileMeta], full: bool = False) -> DeletionVectorCompaction | None:
        """Compact the bucket holding `files` (None when there is nothing to do)."""
        level0 = [f for f in files if f.level == 0]
        upper = [f for f in files if f.level > 0]
        max_level = self.num_levels - 1
        if full:
            if not files or (not level0 and len({f.level for f in upper}) == 1
                             and upper[0].level == max_level and not self.base.vectors):
                return None
            unit, output, above = list(files), max_level, list[DataFileMeta]()
        else:
            if not level0:
                return None
            unit, output, above = self._pick(level0, upper, max_level)
        written: list[DataFileMeta] = []
        try:
            changelog = []
            if self.level0_changelog is not None:
                # Before anything is marked: the level-0 records against the files above level 0.
                written += self.level0_changelog.changelog(self.partition, self.bucket,
                                                           [f for f in unit if f.level == 0], upper)
                changelog = list(written)
            done = self._run(unit, output, above, written)
            done.changelog_files = changelog
            return done
        except Exception:
            # Nothing of a failed compaction stays behind.
            for f in written:
                self.table.file_io.delete_file(f"{self.bucket_dir}/{f.file_name}")
            raise

    def _pick(self, level0: list[DataFileMeta], upper: list[DataFileMeta],
              max_level: int) -> tuple[list[DataFileMeta], int, list[DataFileMeta]]:
        """The unit, its output level and the files above it: what Paimon's universal compaction
        picks when that takes all of level 0 (so levels move up as in Paimon), else level 0 and the
        level-1 files it overlaps."""
        picked = pick_unit(Levels(level0 + upper, self.num_levels), self.options, False)
        if picked is not None and picked.output_level > 0:
            names = {f.file_name for f in picked.files}
            above = [f for f in upper if f.file_name not in names]
            if (all(f.file_name in names for f in level0)
                    and all(f.level > picked.output_level for f in above)):
                return list(picked.files), picked.output_level, above
        if not upper:
            return level0, max_level, []
        lowest = min(f.level for f in upper)
        if lowest > 1:
            return level0, lowest - 1, upper
        level1 = [f for f in upper if f.level == 1]
        overlapping = files_meeting_keys(level1, self.key_types, key_span(level0, self.key_types))
        taken = {f.file_name for f in overlapping}
        return level0 + overlapping, 1, [f for f in upper if f.file_name not in taken]

    def _run(self, unit: list[DataFileMeta], output: int, above: list[DataFileMeta],
             written: list[DataFileMeta]) -> DeletionVectorCompaction:
        lone = unit[0] if len(unit) == 1 else None
        # The newest record of each key wins and nothing retracts: the file moves up as it is.
        upgrade = (lone is not None and lone.level == 0 and self.may_upgrade and lone.delete_row_count == 0)
        levels = [[f for f in above if f.level == lv] for lv in sorted({f.level for f in above})]
        found = None
        if levels:
            # Only level-0 keys are looked up, as Paimon's lookup compaction does: a key of an
            # upper file of the unit is live nowhere above it (its older rows are marked already).
            keys = self._level0_keys([f for f in unit if f.level == 0])
            # Where the newest record always wins, the old rows are not merged: only their places
            # are needed, so only the key columns of the older files are read.
            wanted = (pa.schema([self.read_schema.field(k) for k in self.key_names]) if self.may_upgrade
                      else self.read_schema)
            found = lookup(keys, levels, self._read, self.key_names, wanted,
                           lambda f: (self._key(f.min_key), self._key(f.max_key)), comparable_key,
                           lambda f, _rows: self._live(f))
        marks = found.positions_by_file() if found is not None else {}
        if upgrade:
            assert lone is not None
            before, after = [lone], [lone.upgrade(output)]
        else:
            old = None
            if found is not None and found.old_rows.num_rows and not self.may_upgrade:
                old = found.old_rows.select(self.columns).cast(self.read_schema)
            outputs = self._merge_and_write(unit, output, old)
            written.extend(outputs)
            before, after = list(unit), outputs
        return DeletionVectorCompaction(before, after, self._index_files(unit, above, marks))

    def _level0_keys(self, level0: list[DataFileMeta]) -> pa.Table:
        """The distinct keys of level-0 files (their key columns only; kept ones not read again)."""
        key_schema = pa.schema([self.read_schema.field(k) for k in self.key_names])
        parts = []
        for f in level0:
            known = self.known_keys.get(f.file_name)
            parts.append(known.cast(key_schema) if known is not None and known.num_rows == f.row_count
                         else self._read(f, list(self.key_names)))
        if not parts:
            return key_schema.empty_table()
        if len(parts) == 1:
            return parts[0]  # a data file's keys are distinct
        return pa.concat_tables(parts).group_by(self.key_names, use_threads=False).aggregate([])

    def _merge_and_write(self, unit: list[DataFileMeta], output: int,
                         old: pa.Table | None) -> list[DataFileMeta]:
        """The unit merged (upper files with their vectors applied; `old`, the looked-up older rows
        of its keys, merged with the records of their keys) and written at `output`, key range by
        key range (`range_merge`): memory within `sort-spill-buffer-size` besides `old`."""
        merge_function = self.merge_function

        def merge(rows: pa.Table, _in_order: bool) -> pa.Table:
            if old is not None:
                code = match_keys(old, rows, self.key_names)
                hits = np.unique(code[code >= 0])
                if len(hits):
                    rows = pa.concat_tables([old.take(pa.array(hits)), rows])
            # (Sequence numbers order the older levels' rows before the unit's.)
            return merge_function.merge(rows, drop_retracts=True, rows_in_sequence_order=False,
                                        threads=cores())

        ranges = range_merge(unit, self._batches, self.key_names, merge, self.budget, self._key)
        writer = RollingRunWriter(
            DataFileWriter(self.table.file_io, self.table.schema, self.bucket_dir,
                           self.table.path_factory.new_data_file_name, self.target_file_size),
            output, FILE_SOURCE_COMPACT)
        return writer.write_all(ranges)

    def _batches(self, f: DataFileMeta, batch_bytes: int) -> Iterator[pa.Table]:
        """A unit file as batches, the rows its vector marks dropped."""
        path = f"{self.bucket_dir}/{f.file_name}"
        batches = checked_batches(self.reader.read_batches(path, self.columns, self.read_schema, f, batch_bytes),
                                  path, self.key_names, self.key_types, f)
        keep = self._live(f)
        if keep is None:
            yield from batches
            return
        offset = 0
        for t in batches:
            part = keep[offset:offset + t.num_rows]
            offset += t.num_rows
            yield t if part.all() else t.filter(pa.array(part))

    def _index_files(self, unit: list[DataFileMeta], above: list[DataFileMeta],
                     marks: dict[str, np.ndarray]) -> list[IndexManifestEntry]:
        """The bucket's vectors after the compaction, as new index files (none when the bucket had
        no vector and still has none)."""
        vectors: dict[str, np.ndarray] = {}
        for f in above:
            deletion = self.base.vectors.get(f.file_name)
            new = marks.get(f.file_name, np.empty(0, np.int64))  # sorted and distinct
            if deletion is None:
                if len(new):
                    vectors[f.file_name] = new
                continue
            # The old marks and the new as one mask: a union without sorting them together.
            deleted = ~self.vectors.keep_mask(deletion, f.row_count)
            deleted[new] = True
            positions = np.flatnonzero(deleted)
            if len(positions):
                vectors[f.file_name] = positions
        if not vectors and not self.base.index_files:
            return []
        unchanged = ({f for f in vectors} == set(self.base.vectors)
                     and not any(f.file_name in self.base.vectors for f in unit) and not marks)
        if unchanged:
            return []
        return write_deletion_vector_files(
            self.table.file_io, self.table.path_factory.index_dir,
            self.table.path_factory.new_index_file_name, self.partition.binary, self.bucket,
            vectors, self.index_target_size)
