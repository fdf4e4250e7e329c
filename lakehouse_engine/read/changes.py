"""Reading changes: a scan over snapshots, shared by streaming reads, batch incremental reads,
Spark and the CLI.

What a snapshot changed is read in one of two ways, as Paimon's follow-up scanners read it:
  * delta (a table without a changelog producer): the data files an APPEND snapshot added, each
    record with the row kind it was written with (COMPACT and OVERWRITE snapshots change no row);
  * changelog (`changelog-producer` input, lookup or full-compaction): the changelog files the
    snapshot's `changelogManifestList` names (`changelog-<uuid>-<n>.<format>` in the bucket
    directories, KeyValue layout with `_VALUE_KIND`), of every snapshot but OVERWRITE.
Both are read as stored (no merge), file by file in manifest order, so the records of one key come
in the order they were made; a reader gets `_row_kind` (+I, -U, +U, -D) with each row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import (
    CorruptFileError,
    InvalidOptionError,
    SnapshotNotExistError,
    UnsupportedError,
)
from lakehouse_engine.format.manifest_entries import FileKind, ManifestEntry
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.options import CHANGELOG_PRODUCER
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.read.nested_projection import NestedProjectionRead, is_nested_projection
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.read.split import DataSplit, PartitionRow
from lakehouse_engine.read.table_read import TableRead
from lakehouse_engine.schema import VALUE_KIND

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.table import FileStoreTable

#: The column a change read adds for each row's kind (pypaimon's `with_include_row_kind`).
ROW_KIND = "_row_kind"
ROW_KIND_NAMES = ("+I", "-U", "+U", "-D")
DELTA, CHANGELOG = "delta", "changelog"


def as_store(table: FileStore | FileStoreTable) -> FileStore:
    """The FileStore of a table facade (the reads of changes work on the store), or the store."""
    store = getattr(table, "store", None)
    return store if store is not None else table  # type: ignore[return-value]


def row_kind_column(kinds: np.ndarray) -> pa.Array:
    """The `_row_kind` strings of row kind codes 0..3 (a gather from four strings, no Python loop)."""
    return pc.take(pa.array(ROW_KIND_NAMES, pa.string()), pa.array(kinds, pa.int8()))


def changelog_producer(table: FileStore) -> str:
    """The table's `changelog-producer` (none, input, lookup or full-compaction)."""
    return table.options.require(CHANGELOG_PRODUCER)


def follow_up_kind(table: FileStore) -> str:
    """How a streaming read of `table` reads each new snapshot: `delta` without a changelog
    producer, `changelog` with one."""
    return DELTA if changelog_producer(table) == "none" else CHANGELOG


def has_changes(snapshot: Snapshot, kind: str) -> bool:
    """Whether `snapshot` holds changes a `kind` read returns (Paimon's follow-up scanners):
    delta reads APPEND snapshots; changelog reads every snapshot with a changelog manifest list
    but OVERWRITE ones."""
    if kind == DELTA:
        return snapshot.commit_kind == "APPEND"
    return snapshot.commit_kind != "OVERWRITE" and bool(snapshot.changelog_manifest_list)


@dataclass
class ChangeSplit(DataSplit):
    """Files of one (partition, bucket) whose records are read as stored, each with its row kind
    (pypaimon's streaming split: `is_streaming`); one file per section, in the order written."""

    is_streaming: bool = True


class ChangeScan:
    """Plans the change splits of snapshots: their delta or changelog files, pruned by the
    predicate's partition and key ranges and by a bucket filter."""

    def __init__(self, table: FileStore | FileStoreTable, predicate: Predicate | None = None,
                 bucket_filter: Callable[[int], bool] | None = None):
        self.table = table = as_store(table)
        self.predicate = predicate
        self.bucket_filter = bucket_filter
        self._pruner = TableScan(table, predicate)

    def entries(self, snapshot: Snapshot, kind: str) -> list[ManifestEntry]:
        """The files `snapshot` added of this `kind` (delta: its delta manifest list; changelog:
        its changelog manifest list), after pruning."""
        if not has_changes(snapshot, kind):
            return []
        if kind == DELTA and self.table.options.bucket == POSTPONE_BUCKET:
            # Its rows wait in bucket-postpone and reach the table in a COMPACT snapshot, which a
            # delta read skips: it would miss every change.
            raise UnsupportedError(f"table {self.table.name} has 'bucket' = -2 (postpone): its changes "
                                   f"are read from a changelog only; a delta read would miss the rows "
                                   f"postpone compaction moves")
        paths = self.table.path_factory
        if (kind == DELTA and changelog_producer(self.table) != "none"
                and snapshot.file == paths.long_lived_changelog_path(snapshot.id)):
            # A table with a producer keeps only the changelog past a snapshot's expiry: the
            # delta's data files went with it (a compaction replaced them).
            raise SnapshotNotExistError(
                f"snapshot {snapshot.id} of table {self.table.name} expired: its changelog is kept "
                f"(changelog/changelog-{snapshot.id}), its delta is not; read its changes as 'changelog'")
        mio = self.table.manifest_io()
        snapshot_file = snapshot.file or paths.snapshot_path(snapshot.id)
        name: str | None = snapshot.delta_manifest_list
        size = snapshot.delta_manifest_list_size
        if kind == CHANGELOG:
            name, size = snapshot.changelog_manifest_list, snapshot.changelog_manifest_list_size
        assert name is not None
        metas = [m for m in mio.read_manifest_list(name, size, snapshot_file)
                 if self._pruner._manifest_may_match(m)]
        out = []
        for meta in metas:
            for e in mio.read_manifest(meta.file_name, meta.file_size, mio.paths.manifest_path(name)):
                if e.kind != FileKind.ADD:
                    # A delta of an APPEND snapshot and a changelog only ever add files.
                    raise CorruptFileError(
                        f"manifest {e.file.listed_in or meta.file_name} of snapshot {snapshot.id} of "
                        f"table {self.table.name} deletes file {e.file.file_name}: the {kind} files "
                        f"of a snapshot are only ever added")
                if e.bucket == POSTPONE_BUCKET and kind == DELTA:
                    continue  # rows waiting for postpone compaction are not readable yet
                if self.bucket_filter is not None and not self.bucket_filter(e.bucket):
                    continue
                if self.predicate is not None and not self._partition_may_match(e):
                    continue
                if self.predicate is not None and not self._pruner._file_keys_may_match(e):
                    continue
                out.append(e)
        return out

    def _partition_may_match(self, e: ManifestEntry) -> bool:
        keys = self._pruner.partition_keys
        if not keys:
            return True
        values = self.table.partition_codec().from_binary(e.partition).values
        assert self.predicate is not None
        return self.predicate.may_match({k: (v, v) for k, v in zip(keys, values, strict=True)})

    def plan_snapshot(self, snapshot: Snapshot, kind: str) -> list[DataSplit]:
        """The change splits of one snapshot, one per (partition, bucket)."""
        return self._splits(snapshot.id, self.entries(snapshot, kind))

    def plan_range(self, start_exclusive: int, end_inclusive: int, kind: str) -> list[DataSplit]:
        """The change splits of snapshots start_exclusive+1 .. end_inclusive, in snapshot order."""
        splits: list[DataSplit] = []
        for snapshot in snapshots_between(self.table, start_exclusive, end_inclusive):
            splits.extend(self.plan_snapshot(snapshot, kind))
        return splits

    def _splits(self, snapshot_id: int, entries: list[ManifestEntry]) -> list[DataSplit]:
        groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
        for e in entries:
            groups.setdefault((e.partition, e.bucket), []).append(e)
        codec = self.table.partition_codec()
        fields = self._pruner.partition_fields
        out: list[DataSplit] = []
        for (partition, bucket), group in groups.items():
            part = codec.from_binary(partition)
            row = PartitionRow(part.binary, part.values, fields)
            out.append(ChangeSplit(snapshot_id, row, part.values, bucket, group[0].total_buckets,
                                   self.table.path_factory.bucket_dir(part.spec, bucket),
                                   [[e.file] for e in group], False))
        return out


def snapshots_between(table: FileStore, start_exclusive: int, end_inclusive: int) -> Iterator[Snapshot]:
    """Snapshots start_exclusive+1 .. end_inclusive, oldest first, an expired one as its long-lived
    changelog; SnapshotNotExistError names the first one that is in neither."""
    sm = table.snapshot_manager()
    for sid in range(start_exclusive + 1, end_inclusive + 1):
        snapshot = sm.snapshot_or_changelog(sid)
        if snapshot is None:
            earliest = sm.earliest_readable_id()
            raise SnapshotNotExistError(
                f"the changes of table {table.name} between snapshots {start_exclusive} (exclusive) "
                f"and {end_inclusive} need snapshot {sid}, which does not exist (neither as a snapshot "
                f"nor as a long-lived changelog; the earliest readable is {earliest})")
        yield snapshot


class ChangeRead:
    """Reads change splits as stored, with each row's kind, and full-read splits (a streaming
    read's first plan) merged, as +I rows; `include_row_kind` puts `_row_kind` first."""

    def __init__(self, table: FileStore | FileStoreTable, projection: Sequence[str] | None = None,
                 predicate: Predicate | None = None, include_row_kind: bool = False):
        self.table = table = as_store(table)
        self.predicate = predicate
        self.include_row_kind = include_row_kind
        # A projection of nested ROW fields (`col.field`, read as `col_field`) reads the top-level
        # columns and takes the fields out, for change splits as for full ones.
        self._nested: NestedProjectionRead | None = None
        if projection and is_nested_projection(table.schema, projection):
            self._nested = NestedProjectionRead(table, projection, predicate)
        self._full = self._nested or TableRead(table, projection, predicate)
        self.output = list(self._full.output)
        self._columns = list(self._full.value_columns)
        self._file_schema = table.schema.data_file_arrow_schema()
        self._reader = table.file_reader()
        self._primary_key = table.schema.has_primary_key
        fields = list(self._full.output_schema)
        if include_row_kind:
            fields.insert(0, pa.field(ROW_KIND, pa.string(), nullable=False))
        self.output_schema = pa.schema(fields)

    def to_arrow(self, splits: Sequence[DataSplit]) -> pa.Table:
        """The rows of `splits`, in order."""
        tables = [t for t in (self.read_split(s) for s in splits) if t.num_rows]
        return pa.concat_tables(tables) if tables else self.output_schema.empty_table()

    def to_arrow_batch_reader(self, splits: Sequence[DataSplit]) -> pa.RecordBatchReader:
        """A lazy reader that reads one split at a time."""
        def batches() -> Iterator[pa.RecordBatch]:
            for s in splits:
                yield from self.read_split(s).to_batches()
        return pa.RecordBatchReader.from_batches(self.output_schema, batches())

    def to_pandas(self, splits: Sequence[DataSplit]) -> object:
        return self.to_arrow(splits).to_pandas()

    def read_split(self, split: DataSplit) -> pa.Table:
        """One split's rows: a change split's records with their kinds, another split merged."""
        if not isinstance(split, ChangeSplit):
            rows = self._full.read_split(split)
            kinds = np.zeros(rows.num_rows, dtype=np.int8)
        else:
            rows, kinds = self._read_changes(split)
            if self._nested is not None:
                rows = self._nested.reshape(rows)
        if self.include_row_kind:
            rows = rows.add_column(0, pa.field(ROW_KIND, pa.string(), nullable=False), row_kind_column(kinds))
        return rows.cast(self.output_schema)

    def _read_changes(self, split: ChangeSplit) -> tuple[pa.Table, np.ndarray]:
        columns = self._columns + ([VALUE_KIND] if self._primary_key else [])
        schema = pa.schema([self._file_schema.field(c) for c in columns])
        parts = [self._reader.read(f"{split.bucket_path}/{f.file_name}", columns, schema, f)
                 for f in split.files]
        if not parts:
            columns_schema = self._nested.columns_schema if self._nested else self._full.output_schema
            return columns_schema.empty_table(), np.zeros(0, dtype=np.int8)
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if self._primary_key:
            kinds = table.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False).astype(np.int8)
            if len(kinds) and (kinds.min() < 0 or kinds.max() > 3):
                raise CorruptFileError(f"a file of {split.bucket_path} holds a _VALUE_KIND outside 0..3")
        else:
            kinds = np.zeros(table.num_rows, dtype=np.int8)
        if self.predicate is not None:
            # The kinds follow the rows the predicate keeps: filter a position column along.
            table = table.append_column("__position", pa.array(np.arange(table.num_rows)))
            table = self.predicate.filter_table(table)
            kinds = kinds[table.column("__position").to_numpy()]
        return table.select(self.output), kinds


#: The column `read_changes` adds for the snapshot each change came in.
SNAPSHOT_ID = "_snapshot_id"


def read_changes(table: FileStore | FileStoreTable, start_exclusive: int, end_inclusive: int | None = None,
                 kind: str | None = None, projection: Sequence[str] | None = None,
                 predicate: Predicate | None = None) -> pa.Table:
    """Every change of snapshots start_exclusive+1 .. end_inclusive (default: the latest), as
    stored, in snapshot order: `_snapshot_id`, `_row_kind`, then the fields. `kind` is `delta`,
    `changelog` or None (the table's own: changelog when it has a producer)."""
    table = as_store(table)
    if end_inclusive is None:
        end_inclusive = table.snapshot_manager().latest_snapshot_id() or 0
    if start_exclusive < 0 or end_inclusive < start_exclusive:
        raise InvalidOptionError(f"table {table.name}: a change range ({start_exclusive}, {end_inclusive}] "
                                 f"must have 0 <= start <= end")
    kind = kind or follow_up_kind(table)
    if kind not in (DELTA, CHANGELOG):
        raise InvalidOptionError(f"table {table.name}: changes are read as 'delta' or 'changelog', not {kind!r}")
    read = ChangeRead(table, projection, predicate, include_row_kind=True)
    parts = []
    for split in ChangeScan(table, predicate).plan_range(start_exclusive, end_inclusive, kind):
        rows = read.read_split(split)
        parts.append(rows.add_column(0, pa.field(SNAPSHOT_ID, pa.int64(), nullable=False),
                                     pa.array(np.full(rows.num_rows, split.snapshot_id, dtype=np.int64))))
    schema = pa.schema([pa.field(SNAPSHOT_ID, pa.int64(), nullable=False)] + list(read.output_schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()
