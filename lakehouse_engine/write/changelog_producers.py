"""The `lookup` changelog producer at flush: each key of a level-0 run just written, looked up in
the bucket's older files, yields +I, -U/+U or -D (`mergetree.changelog.lookup_changelog`).

A deduplicate table's live row of a key is its newest record, which the shared lookup at commit
(`mergetree.lookup`, levels searched newest first) finds; the other merge engines build a key's
row from all its records, so every older record of the flushed keys is read and merged.
The changelog files go into the bucket's commit message as the compaction's changelog (Paimon
commits the lookup changelog in the COMPACT snapshot, where its stream scan reads it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.changelog import (
    lookup_changelog,
    newest_changelog,
    records_of_keys,
    row_deduplicate,
    write_changelog,
)
from lakehouse_engine.mergetree.lookup import LookupResult as LookupFound
from lakehouse_engine.mergetree.lookup import lookup, rows_at
from lakehouse_engine.mergetree.lookup_cache import CachedFileReader, cache_for
from lakehouse_engine.mergetree.merge_engines.ordering import INSERT, UPDATE_AFTER, UPDATE_BEFORE
from lakehouse_engine.mergetree.merge_order import merge_order
from lakehouse_engine.options import MERGE_ENGINE
from lakehouse_engine.read.deletion_vectors import (
    BucketDeletionFiles,
    DeletionVectorReader,
    deletion_vectors_enabled,
    snapshot_deletion_files,
)
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.write.write_roles import BeforeImages, LookupResult

if TYPE_CHECKING:
    from lakehouse_engine.format.snapshot import Snapshot
    from lakehouse_engine.partition import Partition
    from lakehouse_engine.store.file_store import FileStore


class LookupChangelog:
    """The FlushLookup of a table with `changelog-producer` = lookup."""

    #: Given the run's rows, it looks them up while the writer writes the run's data files.
    takes_run = True

    def __init__(self, table: FileStore, snapshot: Callable[[], Snapshot | None] | None = None):
        """`snapshot`: the snapshot the older files a lookup is given come from; on a table with
        deletion vectors, the rows its vectors mark are dead and never an old row."""
        self.table = table
        self._snapshot = snapshot
        self._vectors: tuple[int, BucketDeletionFiles] | None = None
        self._vector_reader = DeletionVectorReader(table.file_io)
        schema = table.schema
        opts = schema.core_options
        self.key_names = schema.trimmed_primary_keys
        self.key_types = schema.types_of(self.key_names)
        self.fields = schema.field_names
        self.columns = self.fields + [SEQUENCE_NUMBER, VALUE_KIND]
        file_schema = schema.data_file_arrow_schema()
        self.read_schema = pa.schema([file_schema.field(c) for c in self.columns])
        self._before_schema = pa.schema([f for f in self.read_schema if f.name != VALUE_KIND])
        self._kind_schema = pa.schema([file_schema.field(VALUE_KIND)])
        self.engine = opts.require(MERGE_ENGINE)
        self.row_deduplicate = row_deduplicate(opts)
        self.merge_function = table.merge_function()
        self.reader = table.file_reader()
        self.target_file_size = opts.target_file_size(True)
        # The newest record of a key is its row: the old row is looked up, not merged.
        merge_function = self.merge_function
        self.newest_wins = (self.engine == "deduplicate" and not merge_function.sequence_fields
                            and not merge_function.ignore_delete)
        self._reuses_runs = self.newest_wins and not self.row_deduplicate and not deletion_vectors_enabled(opts)

    def reuses_run(self, run: pa.Table) -> bool:
        """Whether the run's data files, with +U for keys that have a live older row and +I for
        the others, are exactly the after-images of Paimon's lookup changelog of the run (so the
        changelog is the -U rows, written apart, then the data files under changelog names).

        Each reason it is not:
        - a merge engine other than deduplicate, `sequence.field` or `ignore-delete`: a key's row
          after the change is a merge of its records (or may be the old one), not the run's row;
        - `changelog-producer.row-deduplicate`: an update equal to its old row gives no -U/+U,
          yet its run row stays in the data file;
        - deletion vectors: their flush marks older rows while it looks up; that path stays one;
        - a -D or -U in the run: a retraction is written to the data file but its changelog is the
          -D of the old row (or nothing), never the run's row.
        """
        if not self._reuses_runs or run.num_rows == 0:
            return False
        kinds = run.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
        return bool(((kinds == INSERT) | (kinds == UPDATE_AFTER)).all())

    def before_images(self, partition: Partition, bucket: int, older: list[DataFileMeta],
                      run: pa.Table) -> BeforeImages | None:
        """For a run `reuses_run` accepts: its rows' kinds (+U where the key has a live older row,
        +I else) and those older rows as -U, in the run's order; None for any other run.

        The keys are matched and only the old rows' kinds read now; their other columns are
        gathered when the -U rows are asked for (while the run's data files encode)."""
        if not self.reuses_run(run):
            return None
        new = run.select(self.columns)
        read = self._read_of(partition, bucket)
        found = self._lookup_newest(new.select(self.key_names), older, read, self._kind_schema)
        live = np.zeros(found.old_rows.num_rows, bool)
        if found.old_rows.num_rows:
            old_kinds = found.old_rows.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
            live = (old_kinds == INSERT) | (old_kinds == UPDATE_AFTER)
        kinds = np.full(new.num_rows, INSERT, np.int8)
        kinds[found.key_index[live]] = UPDATE_AFTER

        def gather() -> pa.Table:
            # Every column but the kind (each -U row's is UPDATE_BEFORE), taken once from the files.
            old = rows_at(found, older, read, self._before_schema)
            # The old rows come in key_index order (level by level); the changelog file is sorted
            # by key, as the run is. Most often (one sorted run holds them all) they already are.
            live_index = found.key_index[live]
            if not (live.all() and bool(np.all(live_index[1:] > live_index[:-1]))):
                old = old.take(pa.array(np.flatnonzero(live)[np.argsort(live_index, kind="stable")]))
            kind = pa.array(np.full(old.num_rows, UPDATE_BEFORE, np.int8), new.schema.field(VALUE_KIND).type)
            columns = [kind if c == VALUE_KIND else old.column(c) for c in new.column_names]
            if all(c.type == f.type for c, f in zip(columns, new.schema, strict=True)):
                return pa.Table.from_arrays(columns, schema=new.schema)
            return pa.Table.from_arrays(columns, names=new.column_names).cast(new.schema)

        return BeforeImages(kinds=kinds, gather=gather)

    def cached_reader(self) -> CachedFileReader:
        """Reads the table's data files through this process's lookup cache of the table."""
        return CachedFileReader(self.reader, cache_for(self.table.path_factory.table_path,
                                                       self.table.schema.core_options))

    def lookup(self, partition: Partition, bucket: int, flushed: list[DataFileMeta],
               older: list[DataFileMeta], run: pa.Table | None = None) -> LookupResult:
        """The changelog files of the run `flushed` (its rows `run`, in file layout, when the
        writer holds them) against the bucket's `older` files."""
        bucket_dir = self.table.path_factory.bucket_dir(partition.spec, bucket)
        read = self._read_of(partition, bucket)
        parts = [run.select(self.columns)] if run is not None else [read(f) for f in flushed]
        if not parts or not parts[0].num_rows:
            return LookupResult()
        new = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        keys = new.select(self.key_names)
        if self.newest_wins:
            found = self._lookup_newest(keys, older, read)
            changes = newest_changelog(new, found.key_index, found.old_rows, self.fields,
                                       self.row_deduplicate)
            files = write_changelog(self.table.file_io, self.table.schema, bucket_dir,
                                    self.table.path_factory.new_changelog_file_name,
                                    self.target_file_size, changes)
            return LookupResult(changelog_files=files)
        if self.engine == "deduplicate" and not self.merge_function.sequence_fields:
            # (with `sequence.field` the row is the largest by it, which an older level may hold:
            # a compaction of level 0 into a level below a run is not merged with that run)
            old = self._newest(keys, older, read)
        else:
            old = self._older_records(keys, older, read)
        old = old if old is not None else self.read_schema.empty_table()

        def merge(rows: pa.Table) -> pa.Table:
            return self.merge_function.merge(rows, drop_retracts=False, rows_in_sequence_order=False)

        changes = lookup_changelog(new, old, self.key_names, merge, self.fields, self.row_deduplicate,
                                   first_row=self.engine == "first-row")
        files = write_changelog(self.table.file_io, self.table.schema, bucket_dir,
                                self.table.path_factory.new_changelog_file_name, self.target_file_size,
                                changes)
        return LookupResult(changelog_files=files)

    def record_changes(self, partition: Partition, bucket: int, records: pa.Table,
                       older: list[DataFileMeta], in_order: bool = False) -> pa.Table:
        """The changelog of `records` (level-0 records a compaction takes up, several of a key
        allowed, in merge order; `in_order`: their order is sequence order) against the bucket's
        `older` files: one change per key, the row `older` holds against every record merged with
        it, as Paimon's LookupChangelogMergeFunctionWrapper gives it (sorted by key)."""
        read = self._read_of(partition, bucket)
        new = records.select(self.columns)
        if self.newest_wins:
            new = self.merge_function.merge(new, drop_retracts=False, rows_in_sequence_order=in_order)
            found = self._lookup_newest(new.select(self.key_names), older, read)
            return newest_changelog(new, found.key_index, found.old_rows, self.fields, self.row_deduplicate)
        # The row before: every older record of the keys merged (what a read of `older` shows).
        keys = new.select(self.key_names).group_by(self.key_names, use_threads=False).aggregate([])
        old = self._older_records(keys, older, read)

        def merge(rows: pa.Table) -> pa.Table:
            return self.merge_function.merge(rows, drop_retracts=False, rows_in_sequence_order=False)

        return lookup_changelog(new, old if old is not None else self.read_schema.empty_table(), self.key_names,
                                merge, self.fields, self.row_deduplicate, first_row=self.engine == "first-row")

    def _older_records(self, keys: pa.Table, older: list[DataFileMeta],
                       read: Callable[..., pa.Table]) -> pa.Table | None:
        """Every record of `keys` in the `older` files, in merge order, as a read merges them: a
        table that needs lookups keeps of those above level 0 only each key's latest (Paimon's
        LookupMergeFunction; `mergetree.lookup_merge`)."""
        levels: list[np.ndarray] = []
        old = records_of_keys(keys, merge_order(older), read, self.key_names, self._may_hold(keys),
                              levels=levels)
        if old is None or not self.merge_function.lookup:
            return old
        return self.merge_function.lookup_candidates(old, np.concatenate(levels))

    def _read_of(self, partition: Partition, bucket: int) -> Callable[..., pa.Table]:
        """Reads columns of the bucket's data files through the lookup cache, without the rows
        their deletion vectors mark."""
        bucket_dir = self.table.path_factory.bucket_dir(partition.spec, bucket)
        vectors = self._deletion_files().get((partition.binary, bucket), {})
        reader = self.cached_reader()

        def read(f: DataFileMeta, columns: list[str] | None = None) -> pa.Table:
            cols = columns or self.columns
            schema = pa.schema([self.read_schema.field(c) for c in cols])
            rows = reader.read(f"{bucket_dir}/{f.file_name}", cols, schema, f)
            deletion = vectors.get(f.file_name)
            if deletion is None:
                return rows
            # A row its deletion vector marks is an older version of a key, replaced or deleted.
            keep = self._vector_reader.keep_mask(deletion, f.row_count)
            return rows if keep.all() else rows.filter(pa.array(keep))

        return read

    def _deletion_files(self) -> BucketDeletionFiles:
        """The deletion vectors of the snapshot the older files come from (none without vectors)."""
        if self._snapshot is None or not deletion_vectors_enabled(self.table.schema.core_options):
            return {}
        snapshot = self._snapshot()
        if snapshot is None:
            return {}
        if self._vectors is None or self._vectors[0] != snapshot.id:
            self._vectors = (snapshot.id, snapshot_deletion_files(self.table, snapshot))
        return self._vectors[1]

    def _newest(self, keys: pa.Table, older: list[DataFileMeta], read: Any) -> pa.Table | None:
        """Each key's newest record in `older`, retractions included (a key whose newest record
        is a -D is gone); None when no key has one."""
        found = self._lookup_newest(keys, older, read)
        return found.old_rows if found.old_rows.num_rows else None

    def _lookup_newest(self, keys: pa.Table, older: list[DataFileMeta], read: Any,
                       schema: pa.Schema | None = None) -> LookupFound:
        """The shared lookup of `keys` in `older`: level-0 runs newest first, then levels 1, 2, ...;
        the old rows with the columns of `schema` (default: every column read)."""
        level0 = sorted((f for f in older if f.level == 0),
                        key=lambda f: (f.max_sequence_number, f.min_sequence_number), reverse=True)
        levels: list[list[DataFileMeta]] = [[f] for f in level0]
        for level in sorted({f.level for f in older if f.level > 0}):
            levels.append([f for f in older if f.level == level])
        # The kind (one byte a row) comes with the keys: no read of its own for a kind-only lookup.
        return lookup(keys, levels, read, self.key_names, schema or self.read_schema, self._range, comparable_key,
                      read_with_keys=[VALUE_KIND])

    def _range(self, f: DataFileMeta) -> tuple[Any, Any]:
        return (comparable_key(deserialize_row(f.min_key, self.key_types)),
                comparable_key(deserialize_row(f.max_key, self.key_types)))

    def _may_hold(self, keys: pa.Table) -> Any:
        if any(pa.types.is_floating(keys.schema.field(k).type) for k in self.key_names):
            return None  # Arrow's order and Java's differ on -0.0 and NaN: read every file
        order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in self.key_names])
        first, last = order[0].as_py(), order[len(order) - 1].as_py()
        low = comparable_key(tuple(keys.column(k)[first].as_py() for k in self.key_names))
        high = comparable_key(tuple(keys.column(k)[last].as_py() for k in self.key_names))
        return lambda f: not (self._range(f)[1] < low or self._range(f)[0] > high)
