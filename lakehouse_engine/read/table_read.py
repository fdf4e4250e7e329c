"""TableRead: read splits to Arrow, merging overlapping sorted runs (merge-on-read)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse_engine.errors import InvalidOptionError, UnsupportedError
from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_COMPACT
from lakehouse_engine.mergetree.data_file_check import checked_batches
from lakehouse_engine.mergetree.merge import (
    INSERT,
    UPDATE_AFTER,
)
from lakehouse_engine.mergetree.merge_order import merge_order, sequence_disjoint
from lakehouse_engine.mergetree.range_merge import merge_budget, range_merge
from lakehouse_engine.options import (
    READ_PARALLELISM,
)
from lakehouse_engine.read.deletion_vectors import DeletionVectorReader
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.threads import cores, ordered_streams, parallel_map

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


#: pypaimon's row-kind column, first in a read with `include_row_kind` set.
ROW_KIND_COLUMN = "_row_kind"


class TableRead:
    """Reads splits of one table with an optional projection, predicate and row limit.

    `include_row_kind = True` (pypaimon's attribute) adds `_row_kind` as the first column, after
    any projection. A batch read returns merged rows, each the current value of its key: `+I`.
    """

    include_row_kind: bool = False

    def __init__(self, table: FileStore, projection: Sequence[str] | None = None,
                 predicate: Predicate | None = None, limit: int | None = None, for_rewrite: bool = False,
                 merge_threads: int | None = None):
        self.table = table
        self._reader = table.file_reader(for_rewrite)
        schema = table.schema
        self.output = list(projection) if projection else schema.field_names
        self.predicate = predicate
        self.limit = limit
        self.output_schema = pa.schema([schema.field(n).to_arrow() for n in self.output])
        needed = list(self.output)
        for f in sorted(predicate.fields()) if predicate else []:
            if f not in needed:
                needed.append(f)
        self.value_columns = needed
        opts = schema.core_options
        self.primary_key = schema.has_primary_key
        self.key_names = schema.trimmed_primary_keys if self.primary_key else []
        self.merge_function = table.merge_function() if self.primary_key else None
        merge_cols = (self.merge_function.columns_needed(needed) if self.merge_function is not None
                      else list(needed))
        for f in self.key_names + opts.sequence_fields:
            if f not in merge_cols:
                merge_cols.append(f)
        self.merge_value_columns = merge_cols
        self._file_schema = schema.data_file_arrow_schema()
        self._key_types = schema.types_of(self.key_names)
        self._schema_file = table.path_factory.schema_path(schema.id)
        self._budget = merge_budget(opts)
        self._vectors = DeletionVectorReader(table.file_io)
        self._branch_reads: dict[str, TableRead] = {}
        self._merge_threads = merge_threads  # threads of one section's merge (None: cores)

    def _branch_read(self, branch: str) -> TableRead:
        """The same read of another branch's store (splits of `scan.fallback-branch`)."""
        found = self._branch_reads.get(branch)
        if found is None:
            found = self._branch_reads[branch] = TableRead(
                self.table.for_branch(branch), self.output, self.predicate, self.limit)
        return found

    # ---- public -----------------------------------------------------------------------
    def to_arrow(self, splits: Sequence[DataSplit], parallelism: int | None = None) -> pa.Table:
        """All rows of `splits` as one Arrow table, in split order.

        `parallelism` (pypaimon's argument): threads reading at once; default the
        `read.parallelism` option, else one per core; 1 reads serially. The unit of work is a
        split that must be merged, or one file of a split whose files are read as they are (a
        deletion-vector table's, Paimon's raw-convertible splits): parquet decoding releases the
        GIL, so a few large files are read on all threads, not one thread per split; the
        largest units start first, so that no large file is left to decode alone at the end.
        """
        units = _read_units(splits)
        threads = self._threads(len(units), parallelism)
        if self.limit is None and threads > 1:
            # The units' threads keep the cores busy: each merge reads its files in its own.
            # Largest first (then back in split order): a large file read last would leave the
            # other threads idle while it decodes.
            order = sorted(range(len(units)), key=lambda i: -_unit_bytes(units[i]))
            merge_threads, self._merge_threads = self._merge_threads, 1
            try:
                read = parallel_map(self._read_unit, [units[i] for i in order], threads)
            finally:
                self._merge_threads = merge_threads
            by_unit = dict(zip(order, read, strict=True))
            tables = [t for t in (by_unit[i] for i in range(len(units))) if t.num_rows]
        else:
            tables = list(self._read_splits(splits))
        if not tables:
            return self._with_row_kind(self.output_schema.empty_table())
        return self._with_row_kind(pa.concat_tables(tables))

    def _read_unit(self, unit: tuple[DataSplit, int | None]) -> pa.Table:
        """One unit of `_read_units`: a whole split, or one file-section of a split."""
        split, section = unit
        if section is None:
            return self.read_split(split)
        parts = [t for t in self._shaped(self._read_section(split, split.sections[section])) if t.num_rows]
        if not parts:
            return self.output_schema.empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _with_row_kind(self, table: pa.Table) -> pa.Table:
        if not self.include_row_kind:
            return table
        kinds = pa.repeat(pa.scalar("+I", pa.string()), table.num_rows)
        return table.add_column(0, pa.field(ROW_KIND_COLUMN, pa.string()), kinds)

    def _threads(self, n_splits: int, parallelism: int | None) -> int:
        if parallelism is None:
            parallelism = self.table.options.get(READ_PARALLELISM)
        elif isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise InvalidOptionError(f"parallelism must be an integer >= 1, got {parallelism!r}")
        cap = parallelism if parallelism is not None else cores()
        return max(1, min(n_splits, cap))

    def to_arrow_batch_reader(self, splits: Sequence[DataSplit]) -> pa.RecordBatchReader:
        """A lazy reader that reads one split at a time, or, when every split's files are read
        as they are (a deletion-vector table's), several files at once in split order."""
        def batches() -> Iterator[pa.RecordBatch]:
            for t in self._streamed(splits):
                yield from self._with_row_kind(t).to_batches()
        schema = self._with_row_kind(self.output_schema.empty_table()).schema
        return pa.RecordBatchReader.from_batches(schema, batches())

    def to_pandas(self, splits: Sequence[DataSplit], parallelism: int | None = None) -> Any:
        return self.to_arrow(splits, parallelism=parallelism).to_pandas()

    def to_iterator(self, splits: Sequence[DataSplit]) -> Iterator[Row]:
        """The rows of `splits` one at a time, read one split at a time (pypaimon's
        `to_iterator`): each a Row with `get_field(i)`, `get_row_kind()` and `to_dict()`."""
        names = list(self.output_schema.names)
        for t in self._read_splits(splits):
            for batch in t.to_batches():
                columns = [c.to_pylist() for c in batch.columns]
                for values in zip(*columns, strict=True):
                    yield Row(values, names)

    def to_duckdb(self, splits: Sequence[DataSplit], table_name: str, connection: Any = None,
                  parallelism: int | None = None) -> Any:
        """The rows of `splits` registered as `table_name` in a DuckDB connection (a new in-memory
        one unless given). Needs the `duckdb` package, which the engine does not depend on."""
        try:
            import duckdb
        except ImportError:
            raise UnsupportedError("to_duckdb needs the duckdb package: pip install duckdb") from None
        con = connection if connection is not None else duckdb.connect(database=":memory:")
        con.register(table_name, self.to_arrow(splits, parallelism=parallelism))
        return con

    # ---- reading ------------------------------------------------------------------------
    def _streamed(self, splits: Sequence[DataSplit]) -> Iterator[pa.Table]:
        """The rows of `splits` in split order, holding about `sort-spill-buffer-size` of them.

        A merge holds one key range at a time (`read_split_ranges`). When every file of `splits`
        is read as it is (Paimon's raw-convertible splits, a deletion-vector table's: no merge),
        files are decoded ahead on one thread each (`read.parallelism`, else one per core), each
        in batches of a share of the budget, so that the batches in flight hold about the budget.
        """
        files = _raw_files(splits, self.primary_key)
        threads = 1 if files is None else self._threads(len(files), None)
        if files is None or self.limit is not None or threads <= 1:
            yield from self._read_splits(splits)
            return
        # Per thread one batch queued and one being decoded (`ordered_streams` of depth 1).
        batch_bytes = max(self._budget // (2 * threads), 1)

        def stream(split: DataSplit, meta: DataFileMeta) -> Callable[[], Iterator[pa.Table]]:
            return lambda: (t for t in self._shaped(self._live_batches(
                split, meta, self._raw_columns(meta), batch_bytes, drop_retractions=True)) if t.num_rows)

        yield from ordered_streams([stream(split, meta) for split, meta in files], threads)

    def _read_splits(self, splits: Sequence[DataSplit]) -> Iterator[pa.Table]:
        remaining = self.limit
        for split in splits:
            for t in self.read_split_ranges(split):
                if remaining is not None:
                    t = t.slice(0, remaining)
                    remaining -= t.num_rows
                if t.num_rows:
                    yield t
                if remaining is not None and remaining <= 0:
                    return

    def read_split(self, split: DataSplit) -> pa.Table:
        """The merged rows of one split, filtered and projected."""
        parts = list(self.read_split_ranges(split))
        if not parts:
            return self.output_schema.empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def read_split_ranges(self, split: DataSplit) -> Iterator[pa.Table]:
        """The merged rows of one split, filtered and projected, as consecutive tables: one key
        range of one section at a time, so a reader holds about `sort-spill-buffer-size` of
        rows whatever the split's size (see `mergetree.range_merge`)."""
        if split.branch is not None and split.branch != self.table.branch:
            yield from self._branch_read(split.branch).read_split_ranges(split)
            return
        for section in split.sections:
            for t in self._shaped(self._read_section(split, section)):
                if t.num_rows:
                    yield t

    def _shaped(self, tables: Iterator[pa.Table]) -> Iterator[pa.Table]:
        """Read rows filtered by the predicate and projected to the output schema."""
        for t in tables:
            if not t.num_rows:
                continue
            t = t.select(self.value_columns)
            if self.predicate is not None:
                t = self.predicate.filter_table(t)
            yield t.select(self.output).cast(self.output_schema) if t.num_rows else t

    def _read_section(self, split: DataSplit, files: list[DataFileMeta]) -> Iterator[pa.Table]:
        if len(files) == 1 or not self.primary_key:
            # Each file as it is (an append table's sections, a deletion-vector table's, a file
            # no other overlaps): no merge, no key or sequence column, retractions dropped.
            for f in files:
                yield from self._live_batches(split, f, self._raw_columns(f), self._budget,
                                              drop_retractions=True)
            return
        # Oldest first, in the one merge order every merge path uses (ties included), key range
        # by key range. When the files' sequence ranges are disjoint, file order is sequence
        # order and `_SEQUENCE_NUMBER` need not be read. A row a deletion vector marks is gone
        # before the merge sees it (`_live_batches`).
        columns = list(self.merge_value_columns) + [VALUE_KIND]
        if not sequence_disjoint(merge_order(files)):
            columns.append(SEQUENCE_NUMBER)
        function = self.merge_function
        assert function is not None

        def merge(rows: pa.Table, in_order: bool) -> pa.Table:
            return function.merge(rows, drop_retracts=True, rows_in_sequence_order=in_order,
                                  columns=self.value_columns)

        yield from range_merge(files, lambda f, size: self._live_batches(split, f, columns, size),
                               self.key_names, merge, self._budget, self._key_of, self._merge_threads,
                               candidates=function.lookup_candidates if function.lookup else None)

    def _raw_columns(self, meta: DataFileMeta) -> list[str]:
        """What a read of one file as it is decodes: the value columns, and `_VALUE_KIND` (of a
        primary-key table) only when the file may hold retractions (see `may_hold_retractions`)."""
        if self.primary_key and may_hold_retractions(meta):
            return self.value_columns + [VALUE_KIND]
        return self.value_columns

    def _live_batches(self, split: DataSplit, meta: DataFileMeta, columns: list[str],
                      batch_bytes: int, drop_retractions: bool = False) -> Iterator[pa.Table]:
        """The rows of one file of `split` (`columns` of them, in batches of about `batch_bytes`)
        without those its deletion vector marks and, with `drop_retractions` and `_VALUE_KIND`
        among `columns`, without retractions (and without `_VALUE_KIND`): the one place a read
        applies deletion vectors, one mask and one `filter` per batch."""
        path = f"{split.bucket_path}/{meta.file_name}"
        schema = pa.schema([self._file_schema.field(c) for c in columns])
        batches = self._reader.read_batches(path, columns, schema, meta, batch_bytes,
                                            schema_file=self._schema_file)
        checked = checked_batches(batches, path, self.key_names, self._key_types, meta)
        deletion = split.deletion_file(meta.file_name)
        vector = None if deletion is None else self._vectors.keep_mask(deletion, meta.row_count)
        kinds = drop_retractions and VALUE_KIND in columns
        if vector is None and not kinds:
            yield from checked
            return
        offset = 0
        for t in checked:
            keep = None if vector is None else vector[offset:offset + t.num_rows]
            offset += t.num_rows
            if kinds:
                k = t.column(VALUE_KIND).to_numpy()
                live = (k == INSERT) | (k == UPDATE_AFTER)
                keep = live if keep is None else keep & live
                t = t.drop_columns([VALUE_KIND])  # read to find the retractions: not copied on
            assert keep is not None
            yield t if keep.all() else t.filter(pa.array(keep))

    def _key_of(self, binary: bytes) -> tuple[Any, ...]:
        return comparable_key(deserialize_row(binary, self._key_types))


def may_hold_retractions(meta: DataFileMeta) -> bool:
    """Whether a primary-key data file may hold `-D`/`-U` rows, which a read of it as it is drops.

    Only a file a compaction wrote (`_FILE_SOURCE` COMPACT: this engine's or Paimon's rewriters,
    which count what they write) is trusted with a `_DELETE_ROW_COUNT` of 0: pypaimon 2.1.0
    records 0 for level-0 files that do hold retractions, and a compaction may move such a file
    up a level without rewriting it (an upgrade keeps its APPEND source). A count of null
    (writers before Paimon 0.8) is unknown."""
    return not (meta.delete_row_count == 0 and meta.file_source == FILE_SOURCE_COMPACT)


def _read_units(splits: Sequence[DataSplit]) -> list[tuple[DataSplit, int | None]]:
    """The units a parallel read reads on its threads, in output order: each section of a split
    whose sections are single files (no merge between them) on its own, any other split whole."""
    units: list[tuple[DataSplit, int | None]] = []
    for split in splits:
        if split.branch is None and len(split.sections) > 1 and all(len(s) == 1 for s in split.sections):
            units.extend((split, i) for i in range(len(split.sections)))
        else:
            units.append((split, None))
    return units


def _raw_files(splits: Sequence[DataSplit], primary_key: bool) -> list[tuple[DataSplit, DataFileMeta]] | None:
    """Every file of `splits` in read order, when each is read as it is (as `_read_section` reads a
    section of one file, or any section of a table without primary key); else None."""
    files: list[tuple[DataSplit, DataFileMeta]] = []
    for split in splits:
        if split.branch is not None or (primary_key and any(len(s) > 1 for s in split.sections)):
            return None
        files.extend((split, f) for s in split.sections for f in s)
    return files


def _unit_bytes(unit: tuple[DataSplit, int | None]) -> int:
    """The stored bytes a unit of `_read_units` reads."""
    split, section = unit
    files = split.files if section is None else split.sections[section]
    return sum(f.file_size for f in files)


class Row:
    """One row of `TableRead.to_iterator` (pypaimon's InternalRow calls)."""

    __slots__ = ("values", "names")

    def __init__(self, values: tuple[Any, ...], names: list[str]):
        self.values = values
        self.names = names

    def get_field(self, pos: int) -> Any:
        return self.values[pos]

    def __getitem__(self, pos: int) -> Any:
        return self.values[pos]

    def __len__(self) -> int:
        return len(self.values)

    def get_row_kind(self) -> str:
        return "+I"  # a read returns merged rows: all inserts

    def to_dict(self) -> dict[str, Any]:
        return dict(zip(self.names, self.values, strict=True))

    def __repr__(self) -> str:
        return f"Row({self.to_dict()!r})"


