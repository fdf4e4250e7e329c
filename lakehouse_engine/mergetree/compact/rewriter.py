"""The compact task of one bucket: which picked files are merged and rewritten, which only move up.

As Paimon's MergeTreeCompactTask: the picked files are split into sections of overlapping key
ranges. A section of several files is merged and rewritten to the output level. A lone file is
upgraded to the output level without rewriting when it is large (at least `compaction.file-size`,
by default 70% of `target-file-size`); small lone files are rewritten with their neighbours.
Deletes are dropped only when the output is the highest level holding data.
A first-row table's compaction that takes level-0 rows up drops those whose keys already live
above its output level (`mergetree.compact.first_row_lookup`), as Paimon's lookup rewriter does;
given the first sequence number of the level-0 rows whose lookup changelog is not written yet, it
also writes that changelog (`FirstRowChangelog`: the new keys' first rows, `+I`).
A `lookup` changelog table's compaction that takes level-0 files up gives their changelog (Paimon's
LookupMergeTreeCompactRewriter): the caller hands it a `Level0ChangelogWriter`
(`write.level0_changelog`), which compares their records with the bucket's files above level 0.
Such a table's (or a `force-lookup` table's) partial-update or aggregation compaction writes each
key's whole merged value, merged with the key's record below the output level where no input above
level 0 holds it (`mergetree.compact.lookup_levels`, Paimon's LookupChangelogMergeFunctionWrapper).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.changelog import (
    changelog_producer,
    check_producer_options,
    full_compaction_changelog,
    row_deduplicate,
    write_changelog,
)
from lakehouse_engine.mergetree.compact.first_row_lookup import (
    FirstRowChangelog,
    FirstRowLookup,
    without_keys,
)
from lakehouse_engine.mergetree.compact.levels import Levels
from lakehouse_engine.mergetree.compact.lookup_levels import LevelsBelow
from lakehouse_engine.mergetree.compact.universal import CompactUnit
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_COMPACT, DataFileWriter
from lakehouse_engine.mergetree.data_file_check import checked_batches
from lakehouse_engine.mergetree.interval_partition import interval_partition
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, cache_for
from lakehouse_engine.mergetree.lookup_merge import row_levels
from lakehouse_engine.mergetree.merge_engines.ordering import INSERT, UPDATE_AFTER
from lakehouse_engine.mergetree.merge_order import merge_order, sequence_disjoint
from lakehouse_engine.mergetree.range_merge import merge_budget, range_merge
from lakehouse_engine.mergetree.rolling_writer import RollingRunWriter
from lakehouse_engine.options import COMPACTION_FILE_SIZE, MERGE_ENGINE
from lakehouse_engine.partition import Partition
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.threads import cores, parallel_map

if TYPE_CHECKING:
    from lakehouse_engine.io import FileIO
    from lakehouse_engine.mergetree.evolution import EvolvingFileReader
    from lakehouse_engine.mergetree.merge import MergeFunction
    from lakehouse_engine.path_factory import PathFactory
    from lakehouse_engine.schema import TableSchema


class BucketFiles(Protocol):
    """What compacting a bucket needs of a table (the store layer's FileStore has it)."""

    file_io: FileIO
    name: str
    schema: TableSchema
    path_factory: PathFactory

    def merge_function(self) -> MergeFunction: ...

    def file_reader(self, for_rewrite: bool = False) -> EvolvingFileReader: ...

    def schema_by_id(self, schema_id: int) -> TableSchema: ...


class Level0ChangelogWriter(Protocol):
    """Writes the `lookup` changelog of level-0 files a compaction takes up (`write.level0_changelog`)."""

    def changelog(self, partition: Partition, bucket: int, level0: list[DataFileMeta],
                  upper: list[DataFileMeta]) -> list[DataFileMeta]:
        """The changelog files of `level0`'s records against the bucket's files `upper` (above level 0)."""
        ...


# Input bytes merged in one go: bounds memory while keeping output files near their target.
_REWRITE_BATCH_FACTOR = 4


class BucketCompactor:
    """Runs compaction units for one (partition, bucket) and reports the files before and after."""

    def __init__(self, table: BucketFiles, partition: Partition, bucket: int, changelog: bool = True,
                 level0_changelog: Level0ChangelogWriter | None = None,
                 first_row_changelog_from: int | None = None):
        """A compactor of `bucket` of `partition`; without `changelog` a full-compaction table's
        compaction writes none (an overwrite's own files: Paimon commits no overwrite changelog);
        `level0_changelog`: a `lookup` table's, which gives the changelog of level-0 files taken up;
        `first_row_changelog_from`: instead, a first-row table's compaction that takes level 0 up
        writes the lookup changelog of the rows numbered from it on (no writer looked them up)."""
        self.table = table
        self.level0_changelog = level0_changelog
        schema = table.schema
        opts = schema.core_options
        self.partition = partition
        self.bucket = bucket
        self.key_names = schema.trimmed_primary_keys
        self.key_types = schema.types_of(self.key_names)
        self.target_file_size = opts.target_file_size(True)
        explicit = opts.get(COMPACTION_FILE_SIZE)
        self.min_file_size = explicit if explicit is not None else self.target_file_size // 10 * 7
        self.bucket_dir = table.path_factory.bucket_dir(partition.spec, bucket)
        self.columns = schema.field_names + [SEQUENCE_NUMBER, VALUE_KIND]
        file_schema = schema.data_file_arrow_schema()
        self.read_schema = pa.schema([file_schema.field(c) for c in self.columns])
        self.merge_function = table.merge_function()
        self.reader = table.file_reader(for_rewrite=True)
        #: Reads the files below a lookup compaction's output through the table's lookup cache.
        self._cached = (CachedFileReader(self.reader, cache_for(table.path_factory.table_path, opts))
                        if self.merge_function.lookup else None)
        self.budget = merge_budget(opts)
        #: The full-compaction producer's changelog files this compactor wrote (a `lookup`
        #: table's: those of the level-0 files it took up).
        self.changelog_files: list[DataFileMeta] = []
        self._full_changelog = changelog and changelog_producer(opts) == "full-compaction"
        self._row_deduplicate = row_deduplicate(opts) if self._full_changelog else False
        if self._full_changelog:
            check_producer_options(opts, table.name)
        self._top_level = opts.num_levels - 1
        self._first_row = opts.require(MERGE_ENGINE) == "first-row"
        #: The running compaction's levels below its output, where a lookup table's merging
        #: engine looks up the keys no input above level 0 holds (`lookup_levels`).
        self._below: LevelsBelow | None = None
        #: The running compaction's first-row lookup (a first-row table taking level 0 up).
        self._first_row_lookup: FirstRowLookup | None = None
        self._first_row_changelog_from = first_row_changelog_from if self._first_row else None
        #: The running compaction's first-row changelog (see `first_row_changelog_from`).
        self._first_row_changelog: FirstRowChangelog | None = None

    def _older_fields(self, f: DataFileMeta) -> bool:
        if f.schema_id == self.table.schema.id:
            return False
        return self.table.schema_by_id(f.schema_id).fields != self.table.schema.fields

    def _key(self, binary: bytes) -> tuple[Any, ...]:
        return comparable_key(deserialize_row(binary, self.key_types))

    def compact(self, levels: Levels, unit: CompactUnit) -> tuple[list[DataFileMeta], list[DataFileMeta]]:
        """Run `unit` against `levels` (updating them); returns (files before, files after)."""
        output_level = unit.output_level
        below = (LevelsBelow(levels.all_files(), output_level, self._read_columns, self.key_names,
                             self.read_schema, self._key_range, comparable_key)
                 if self.merge_function.lookup and output_level > 0 else None)
        lookup_below = self._below = below or None  # (no level below the output: nothing to look up)
        drop_delete = output_level != 0 and output_level >= levels.non_empty_highest_level()
        # The full-compaction producer: a compaction into the top level yields the changelog of
        # every key it brings there, so files reaching the top are rewritten, never moved.
        changelog = self._full_changelog and output_level == self._top_level
        before: list[DataFileMeta] = []
        after: list[DataFileMeta] = []
        candidate: list[list[DataFileMeta]] = []
        self._first_row_lookup = None
        if self._first_row and output_level > 0 and any(f.level == 0 for f in unit.files):
            self._first_row_lookup = FirstRowLookup(self.table.schema, self.table.path_factory.table_path,
                                                    self.bucket_dir, self.reader, levels, output_level)
        first_row = self._first_row_lookup
        self._first_row_changelog = None
        if first_row is not None and self._first_row_changelog_from is not None:
            self._first_row_changelog = FirstRowChangelog(self._first_row_changelog_from, first_row.reader,
                                                          self.bucket_dir, self.read_schema,
                                                          [f for f in unit.files if f.level > 0], first_row)
        first_row_changelog = self._first_row_changelog

        def upgrade(f: DataFileMeta) -> None:
            if f.level == output_level:
                return
            if lookup_below is not None and f.level == 0:
                # Its records are merged with the values below the output (Paimon rewrites it).
                self._rewrite([[f]], output_level, drop_delete, before, after)
            elif first_row is not None and f.level == 0 and first_row.dropped_keys([f]) is not None:
                # Some of its keys live above the output level: rewritten without those rows.
                self._rewrite([[f]], output_level, drop_delete, before, after)
            elif changelog:
                self._rewrite([[f]], output_level, drop_delete, before, after)
            elif drop_delete and (f.delete_row_count is None or f.delete_row_count > 0):
                # The file may hold deletes that must disappear at the top level: rewrite it.
                self._rewrite([[f]], output_level, drop_delete, before, after)
            elif self._older_fields(f):
                # Written before the table changed shape: rewritten into the latest schema, so
                # files of old schema versions do not stay forever.
                self._rewrite([[f]], output_level, drop_delete, before, after)
            else:
                if first_row_changelog is not None:
                    first_row_changelog.moved(f)
                before.append(f)
                after.append(f.upgrade(output_level))

        def rewrite() -> None:
            if not candidate:
                return
            if len(candidate) == 1 and len(candidate[0]) == 1:
                upgrade(candidate[0][0])
            else:
                self._rewrite(candidate, output_level, drop_delete, before, after)
            candidate.clear()

        try:
            if self.level0_changelog is not None and output_level > 0:
                # Before the levels change: the level-0 records against the files above level 0.
                level0 = [f for f in unit.files if f.level == 0]
                if level0:
                    upper = [f for f in levels.all_files() if f.level > 0]
                    self.changelog_files += self.level0_changelog.changelog(self.partition, self.bucket,
                                                                            level0, upper)
            for section in interval_partition(unit.files, self._key):
                if len(section) > 1 or section[0].file_size < self.min_file_size:
                    candidate.append(section)
                else:
                    rewrite()
                    upgrade(section[0])
            rewrite()
            new_keys = first_row_changelog.rows() if first_row_changelog is not None else None
            if new_keys is not None:
                # Written at the output level, as Paimon's compaction writes its changelog.
                self.changelog_files += write_changelog(
                    self.table.file_io, self.table.schema, self.bucket_dir,
                    self.table.path_factory.new_changelog_file_name, self.target_file_size, new_keys,
                    output_level)
        except Exception:
            # Nothing of a failed compaction may stay behind: delete what it wrote so far.
            kept = {f.file_name for f in before}
            for f in after + self.changelog_files:
                if f.file_name not in kept:
                    self.table.file_io.delete_file(f"{self.bucket_dir}/{f.file_name}")
            self.changelog_files = []
            raise
        finally:
            self._first_row_lookup = self._first_row_changelog = None
            self._below = None
        levels.update(before, after)
        return before, after

    def _rewrite(self, sections: list[list[DataFileMeta]], output_level: int, drop_delete: bool,
                 before: list[DataFileMeta], after: list[DataFileMeta]) -> None:
        """Merge and rewrite sections (key-disjoint, in key order) in batches of bounded input size."""
        batch: list[DataFileMeta] = []
        size = 0
        limit = self.target_file_size * _REWRITE_BATCH_FACTOR
        for section in sections:
            batch.extend(section)
            size += sum(f.file_size for f in section)
            if size >= limit:
                after.extend(self._merge_and_write(batch, output_level, drop_delete))
                before.extend(batch)
                batch, size = [], 0
        if batch:
            after.extend(self._merge_and_write(batch, output_level, drop_delete))
            before.extend(batch)

    def _merge_and_write(self, files: list[DataFileMeta], output_level: int,
                         drop_delete: bool) -> list[DataFileMeta]:
        if self._full_changelog and output_level == self._top_level:
            return self._merge_and_write_with_changelog(files, output_level, drop_delete)
        # Key range by key range in the one merge order (ties resolve as merge-on-read resolves
        # them), in `sort-spill-buffer-size`; the next range merges while this one is written.
        first_row = self._first_row_lookup
        dropped = first_row.dropped_keys(files) if first_row is not None else None

        below = self._below

        def merge(rows: pa.Table, in_order: bool) -> pa.Table:
            merged = self.merge_function.merge(rows, drop_retracts=drop_delete,
                                               rows_in_sequence_order=in_order and below is None,
                                               threads=cores())
            return merged if dropped is None else without_keys(merged, dropped, self.key_names)

        function = self.merge_function

        def candidates(rows: pa.Table, levels: np.ndarray, in_order: bool) -> pa.Table:
            # Paimon's LookupChangelogMergeFunctionWrapper: the latest record above level 0, or
            # the key's record below the output (put first; merged by sequence, not file order).
            keep = function.lookup_mask(rows, levels, in_order)
            if keep is not None:
                rows, levels = rows.filter(pa.array(keep)), levels[keep]
            return rows if below is None else below.with_values_below(rows, levels)

        ranges = range_merge(files, self._batches, self.key_names, merge, self.budget, self._key,
                             candidates=candidates if function.lookup else None)
        if self._first_row_changelog is not None:
            ranges = map(self._first_row_changelog.kept, ranges)
        writer = RollingRunWriter(
            DataFileWriter(self.table.file_io, self.table.schema, self.bucket_dir,
                           self.table.path_factory.new_data_file_name, self.target_file_size),
            output_level, FILE_SOURCE_COMPACT)
        return writer.write_all(ranges)

    def _read_columns(self, f: DataFileMeta, columns: list[str]) -> pa.Table:
        """Columns of a data file of the bucket, through this process's lookup cache of the table."""
        schema = pa.schema([self.read_schema.field(c) for c in columns])
        assert self._cached is not None
        return self._cached.read(f"{self.bucket_dir}/{f.file_name}", columns, schema, f)

    def _key_range(self, f: DataFileMeta) -> tuple[Any, Any]:
        return self._key(f.min_key), self._key(f.max_key)

    def _batches(self, f: DataFileMeta, batch_bytes: int) -> Iterator[pa.Table]:
        path = f"{self.bucket_dir}/{f.file_name}"
        batches = self.reader.read_batches(path, self.columns, self.read_schema, f, batch_bytes)
        return checked_batches(batches, path, self.key_names, self.key_types, f)

    def _merge_and_write_with_changelog(self, files: list[DataFileMeta], output_level: int,
                                        drop_delete: bool) -> list[DataFileMeta]:
        """A compaction into the top level of a `full-compaction` changelog table: the whole
        section is merged at once, since its changelog compares every key's old top-level row
        with the merged one (not bounded by `sort-spill-buffer-size`; docs/changelog.md)."""
        ordered = merge_order(files)  # the order merge-on-read uses, so ties resolve alike
        in_order = sequence_disjoint(ordered)
        # The files of one merge are read at once (parquet decoding releases the GIL).
        tables = parallel_map(lambda f: self.reader.read(f"{self.bucket_dir}/{f.file_name}", self.columns,
                                                         self.read_schema, f), ordered)
        rows = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        levels = row_levels([t.num_rows for t in tables], [f.level for f in ordered])
        at_top = levels == self._top_level
        # A `force-lookup` table's: Paimon's LookupMergeFunction candidates.
        keep = self.merge_function.lookup_mask(rows, levels, in_order)
        if keep is not None:
            rows, at_top = rows.filter(pa.array(keep)), at_top[keep]
        if self._full_changelog and output_level == self._top_level:
            kept = self.merge_function.merge(rows, drop_retracts=False, rows_in_sequence_order=in_order,
                                             threads=cores())
            changes = full_compaction_changelog(rows, at_top, kept, self.key_names,
                                                self.table.schema.field_names, self._row_deduplicate)
            self.changelog_files += write_changelog(
                self.table.file_io, self.table.schema, self.bucket_dir,
                self.table.path_factory.new_changelog_file_name, self.target_file_size, changes,
                output_level)
            merged = kept
            if drop_delete and kept.num_rows:
                kinds = kept.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
                merged = kept.filter(pa.array((kinds == INSERT) | (kinds == UPDATE_AFTER)))
        else:
            merged = self.merge_function.merge(rows, drop_retracts=drop_delete,
                                               rows_in_sequence_order=in_order, threads=cores())
        writer = DataFileWriter(self.table.file_io, self.table.schema, self.bucket_dir,
                                self.table.path_factory.new_data_file_name, self.target_file_size)
        return writer.write_run(merged, level=output_level, file_source=FILE_SOURCE_COMPACT)
