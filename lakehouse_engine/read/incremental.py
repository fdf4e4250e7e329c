"""Batch incremental reads: `incremental-between`, `incremental-between-timestamp` and
`incremental-between-scan-mode`, with Paimon's semantics.

The range (start exclusive, end inclusive) comes from snapshot ids, tag names or times
(Paimon's IncrementalStartingScanner, IncrementalTagStartingScanner and
IncrementalTimeStampStartingScanner). What is read:
  1. delta / changelog: the delta (or changelog) files of every snapshot in the range
     (`read.changes`), grouped per (partition, bucket) and merged per key by the table's merge
     function, retractions dropped: one row per key that changed, its latest value;
  2. diff: the end snapshot against the start, per key: the end's row where it is new or differs,
     nothing (or, keeping deletes, a -D of the start's row) where the key is gone.
`auto` is changelog when the table has a changelog producer, else delta; a range of tags without a
mode is a diff, as Paimon 0.9 reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.format.manifest_entries import DataFileMeta, ManifestEntry
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.lookup_merge import row_levels
from lakehouse_engine.mergetree.merge import DELETE, INSERT
from lakehouse_engine.mergetree.merge_engines.ordering import key_change_mask, merge_sort_indices
from lakehouse_engine.mergetree.merge_order import merge_order
from lakehouse_engine.options import (
    INCREMENTAL_BETWEEN,
    INCREMENTAL_BETWEEN_SCAN_MODE,
    INCREMENTAL_BETWEEN_TIMESTAMP,
    SCAN_MODE,
)
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.read.changes import (
    CHANGELOG,
    DELTA,
    ROW_KIND,
    ChangeScan,
    as_store,
    changelog_producer,
    row_kind_column,
    snapshots_between,
)
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.scan import Plan
from lakehouse_engine.read.split import DataSplit, PartitionRow
from lakehouse_engine.read.table_read import TableRead
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.store.tag_files import tag_snapshot

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.table import FileStoreTable

DIFF = "diff"


@dataclass(frozen=True)
class IncrementalRange:
    """Snapshots `start` (exclusive) to `end` (inclusive) and how their changes are read."""

    start: int
    end: int
    mode: str
    #: The tags' own snapshots when tags name the range: a tag keeps its snapshot past expiry.
    tagged: tuple[Snapshot, Snapshot] | None = None


def is_incremental(table: FileStore) -> bool:
    """Whether the table's options ask for a batch incremental read."""
    opts = table.options
    return (opts.get(INCREMENTAL_BETWEEN) is not None or opts.get(INCREMENTAL_BETWEEN_TIMESTAMP) is not None
            or opts.get(SCAN_MODE) == "incremental")


def _pair(table: FileStore, key: str, text: str) -> tuple[str, str]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise InvalidOptionError(f"option '{key}' of table {table.name} is {text!r}: it must name a "
                                 f"start (exclusive) and an end, e.g. '5,10'")
    return parts[0], parts[1]


def incremental_range(table: FileStore) -> IncrementalRange | None:
    """The range the table's incremental options name, None when the table has no snapshot.

    Raises:
        InvalidOptionError: malformed options, a start after the end, or a range outside the
            retained snapshots (Paimon's check: start >= earliest - 1, end <= latest).
    """
    opts = table.options
    mode = opts.require(INCREMENTAL_BETWEEN_SCAN_MODE)
    between = opts.get(INCREMENTAL_BETWEEN)
    times = opts.get(INCREMENTAL_BETWEEN_TIMESTAMP)
    sm = table.snapshot_manager()
    earliest, latest = sm.earliest_snapshot_id(), sm.latest_snapshot_id()
    if between is None and times is None:
        raise InvalidOptionError(f"table {table.name}: scan.mode 'incremental' needs "
                                 f"'incremental-between' or 'incremental-between-timestamp'")
    if earliest is None or latest is None:
        return None
    auto = CHANGELOG if changelog_producer(table) != "none" else DELTA
    tagged: tuple[Snapshot, Snapshot] | None = None
    if between is not None:
        a, b = _pair(table, INCREMENTAL_BETWEEN.key, between)
        if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
            start, end = int(a), int(b)
        else:
            tagged = (tag_snapshot(table, a), tag_snapshot(table, b))
            start, end = tagged[0].id, tagged[1].id
            if end <= start:
                raise InvalidOptionError(f"table {table.name}: tag end {b} (snapshot {end}) must be after "
                                         f"tag start {a} (snapshot {start})")
            auto = DIFF  # Paimon reads a range of tags as the diff of their snapshots
    else:
        assert times is not None
        a, b = _pair(table, INCREMENTAL_BETWEEN_TIMESTAMP.key, times)
        try:
            t1, t2 = int(a), int(b)
        except ValueError:
            raise InvalidOptionError(f"option 'incremental-between-timestamp' of table {table.name} is "
                                     f"{times!r}: expected two epoch milliseconds, e.g. '1700000000000,"
                                     f"1700000600000'") from None
        first = sm.snapshot(earliest)
        last = sm.snapshot(latest)
        if t1 > last.time_millis or t2 < first.time_millis:
            return IncrementalRange(latest, latest, auto if mode == "auto" else mode)
        before = sm.earlier_or_equal_time_mills(t1)
        start = earliest - 1 if before is None or first.time_millis > t1 else before.id
        upto = sm.earlier_or_equal_time_mills(t2)
        end = latest if upto is None else upto.id
    if start > end:
        raise InvalidOptionError(f"table {table.name}: incremental start snapshot {start} must not be "
                                 f"after end snapshot {end}")
    resolved = auto if mode == "auto" else mode
    if resolved == DIFF and tagged is not None:
        # The tags hold both snapshots: no retained snapshot is needed (Paimon's
        # IncrementalTagStartingScanner checks none).
        return IncrementalRange(start, end, resolved, tagged)
    delta_of_producer = resolved == DELTA and changelog_producer(table) != "none"
    if resolved == CHANGELOG or (resolved == DELTA and not delta_of_producer):
        # Changes are read through long-lived changelogs where the snapshots have expired; a
        # delta of a table with a producer is not: its expired snapshots' data files are gone.
        earliest = sm.earliest_readable_id() or earliest
    if start < earliest - 1 or end > latest:
        raise InvalidOptionError(f"table {table.name}: the incremental range ({start}, {end}] is outside "
                                 f"the retained snapshots [{earliest}, {latest}]"
                                 + (" (a delta is not kept past its snapshot when the table has a changelog "
                                    "producer: read the range as 'changelog')" if delta_of_producer else ""))
    return IncrementalRange(start, end, resolved)


@dataclass
class IncrementalSplit(DataSplit):
    """The files of one (partition, bucket) an incremental read merges per key; a diff split also
    has the files live at the start (`before_files`)."""

    mode: str = DELTA
    before_files: list[DataFileMeta] = field(default_factory=list)
    #: Delta / changelog: the snapshot each file came in (file name -> snapshot id).
    snapshot_of: dict[str, int] = field(default_factory=dict)


class IncrementalScan:
    """Plans a batch incremental read: one split per (partition, bucket) that changed."""

    def __init__(self, table: FileStore | FileStoreTable, predicate: Predicate | None = None,
                 range_: IncrementalRange | None = None):
        self.table = table = as_store(table)
        self.predicate = predicate
        self.range = range_ if range_ is not None else incremental_range(table)

    def plan(self) -> Plan:
        r = self.range
        if r is None:
            return Plan([], None)
        if r.mode == DIFF:
            end = r.tagged[1] if r.tagged is not None else self.table.snapshot(r.end)
        else:
            end = _snapshot_or_changelog(self.table, r.end)
        changes = ChangeScan(self.table, self.predicate)
        snapshot_of: dict[str, int] = {}
        groups: dict[tuple[bytes, int], tuple[list[DataFileMeta], list[DataFileMeta]]] = {}
        if r.mode == DIFF:
            scan = changes._pruner
            after = scan.live_entries(end)
            start = r.tagged[0] if r.tagged is not None else self.table.snapshot(r.start) if r.start >= 1 else None
            before = scan.live_entries(start) if start is not None else []
            for e in after:
                groups.setdefault((e.partition, e.bucket), ([], []))[0].append(e.file)
            for e in before:
                groups.setdefault((e.partition, e.bucket), ([], []))[1].append(e.file)
            # Buckets whose files did not change hold no difference.
            groups = {k: v for k, v in groups.items()
                      if {f.file_name for f in v[0]} != {f.file_name for f in v[1]}}
            entries: dict[tuple[bytes, int], ManifestEntry] = {(e.partition, e.bucket): e for e in after + before}
        else:
            entries = {}
            for snapshot in snapshots_between(self.table, r.start, r.end):
                for e in changes.entries(snapshot, r.mode):
                    groups.setdefault((e.partition, e.bucket), ([], []))[0].append(e.file)
                    entries.setdefault((e.partition, e.bucket), e)
                    snapshot_of[e.file.file_name] = snapshot.id
        codec = self.table.partition_codec()
        fields = changes._pruner.partition_fields
        splits: list[DataSplit] = []
        for (partition, bucket), (files, before_files) in sorted(groups.items(), key=lambda kv: kv[0]):
            if bucket == POSTPONE_BUCKET:
                continue
            part = codec.from_binary(partition)
            row = PartitionRow(part.binary, part.values, fields)
            splits.append(IncrementalSplit(r.end, row, part.values, bucket, entries[(partition, bucket)].total_buckets,
                                           self.table.path_factory.bucket_dir(part.spec, bucket),
                                           [files], False, mode=r.mode, before_files=before_files,
                                           snapshot_of={f.file_name: snapshot_of[f.file_name] for f in files
                                                        if f.file_name in snapshot_of}))
        return Plan(splits, end)


def _snapshot_or_changelog(table: FileStore, snapshot_id: int) -> Snapshot:
    """Snapshot `snapshot_id`, or its long-lived changelog; SnapshotNotExistError when neither is."""
    found = table.snapshot_manager().snapshot_or_changelog(snapshot_id)
    return found if found is not None else table.snapshot(snapshot_id)


class IncrementalRead:
    """Reads incremental splits: each key merged once over the range (delta, changelog) or the end
    compared with the start (diff). `keep_delete` keeps retractions and, with `include_row_kind`,
    a `_row_kind` column says which rows they are."""

    def __init__(self, table: FileStore | FileStoreTable, projection: Sequence[str] | None = None,
                 predicate: Predicate | None = None, keep_delete: bool = False,
                 include_row_kind: bool = False):
        self.table = table = as_store(table)
        self._read = TableRead(table, projection, predicate)
        self.predicate = predicate
        self.keep_delete = keep_delete
        self.include_row_kind = include_row_kind
        self.output = list(self._read.output)
        fields = list(self._read.output_schema)
        if include_row_kind:
            fields.insert(0, pa.field(ROW_KIND, pa.string(), nullable=False))
        self.output_schema = pa.schema(fields)
        schema = table.schema
        self._file_schema = schema.data_file_arrow_schema()
        self._reader = table.file_reader()
        self._primary_key = schema.has_primary_key

    def to_arrow(self, splits: Sequence[DataSplit]) -> pa.Table:
        tables = [t for t in (self.read_split(s) for s in splits) if t.num_rows]
        return pa.concat_tables(tables) if tables else self.output_schema.empty_table()

    def to_pandas(self, splits: Sequence[DataSplit]) -> Any:
        return self.to_arrow(splits).to_pandas()

    def to_arrow_batch_reader(self, splits: Sequence[DataSplit]) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(
            self.output_schema, (b for s in splits for b in self.read_split(s).to_batches()))

    def read_split(self, split: DataSplit) -> pa.Table:
        """One split's rows (a plain split reads as a full read would, as +I)."""
        if not isinstance(split, IncrementalSplit):
            rows = self._read.read_split(split)
            kinds = np.zeros(rows.num_rows, dtype=np.int8)
        elif split.mode == DIFF:
            rows, kinds = self._diff(split)
        else:
            rows, kinds = self._merged(split, split.files, self.keep_delete, snapshot_of=split.snapshot_of)
        if self.predicate is not None and rows.num_rows:
            rows = rows.append_column("__position", pa.array(np.arange(rows.num_rows)))
            rows = self.predicate.filter_table(rows)
            kinds = kinds[rows.column("__position").to_numpy()]
        rows = rows.select(self.output)
        if self.include_row_kind:
            rows = rows.add_column(0, ROW_KIND, row_kind_column(kinds))
        return rows.cast(self.output_schema)

    def _merged(self, split: DataSplit, files: list[DataFileMeta], keep_delete: bool,
                columns: list[str] | None = None,
                snapshot_of: dict[str, int] | None = None,
                snapshot_files: bool = False) -> tuple[pa.Table, np.ndarray]:
        """The files merged per key (all of them, even one file: a changelog file may hold a key
        more than once), with each merged row's kind; with `snapshot_of` (the snapshot of each
        file) a later snapshot's record of a key wins over an earlier one's whatever their
        sequence numbers; `snapshot_files`: the files are a snapshot's data files, merged as a
        read merges them (a table that needs lookups: `mergetree.lookup_merge`)."""
        value_columns = columns or self._read.value_columns
        if not files:
            return self._empty(value_columns), np.zeros(0, dtype=np.int8)
        if not self._primary_key:
            parts = [self._file(split, f, value_columns) for f in sorted(files, key=lambda f: f.min_sequence_number)]
            t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
            return t, np.zeros(t.num_rows, dtype=np.int8)
        merge_columns = list(self._read.merge_value_columns)
        for c in value_columns:
            if c not in merge_columns:
                merge_columns.append(c)
        read_columns = merge_columns + [VALUE_KIND, SEQUENCE_NUMBER]
        ordered = merge_order(files)
        if snapshot_of:
            ordered = sorted(ordered, key=lambda f: snapshot_of.get(f.file_name, 0))  # stable
        parts = [self._file(split, f, read_columns) for f in ordered]
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if snapshot_of and len(parts) > 1:
            # Sequence numbers do not order the records of different snapshots: a lookup
            # changelog's -D carries the deleted row's number (as Paimon writes it), and a
            # deletion-vector table's writer starts after the numbers of the rows left, below a
            # delete whose record compaction dropped. Snapshot first, then sequence: numbered
            # again in that order, the merge takes the last snapshot's record of each key.
            snaps = np.repeat(np.array([snapshot_of.get(f.file_name, 0) for f in ordered], dtype=np.int64),
                              [p.num_rows for p in parts])
            seq = table.column(SEQUENCE_NUMBER).combine_chunks().to_numpy(zero_copy_only=False)
            order = np.lexsort((seq, snaps))
            table = table.take(pa.array(order))
            position = table.schema.get_field_index(SEQUENCE_NUMBER)
            table = table.set_column(position, table.schema.field(position),
                                     pa.array(np.arange(table.num_rows, dtype=np.int64)))
        fn = self._read.merge_function
        assert fn is not None
        if snapshot_files and fn.lookup:
            # A snapshot's data files (a diff's side): merged as a read merges them.
            table = fn.lookup_candidates(table, row_levels([p.num_rows for p in parts],
                                                            [f.level for f in ordered]))
        merged = fn.merge(table, drop_retracts=not keep_delete, rows_in_sequence_order=False,
                          columns=value_columns + [VALUE_KIND])
        kinds = merged.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False).astype(np.int8)
        return merged.select(value_columns), kinds

    def _diff(self, split: IncrementalSplit) -> tuple[pa.Table, np.ndarray]:
        """Per key: the end's row where it is new or changed, the start's as -D where gone."""
        schema = self.table.schema
        columns = list(schema.field_names)  # every value decides whether a row changed
        after, after_kinds = self._merged(split, split.files, False, columns, snapshot_files=True)
        before, _ = self._merged(split, split.before_files, False, columns, snapshot_files=True)
        if not self._primary_key:
            kept = {f.file_name for f in split.before_files}
            new = [f for f in split.files if f.file_name not in kept]
            gone_files = [f for f in split.before_files if f.file_name not in {g.file_name for g in split.files}]
            added, _ = self._merged(split, new, False, columns)
            kinds = np.zeros(added.num_rows, dtype=np.int8)
            if self.keep_delete and gone_files:
                gone, _ = self._merged(split, gone_files, False, columns)
                return (pa.concat_tables([added, gone]),
                        np.concatenate([kinds, np.full(gone.num_rows, DELETE, dtype=np.int8)]))
            return added, kinds
        keys = schema.trimmed_primary_keys
        both = pa.concat_tables([before.append_column("__side", pa.array(np.zeros(before.num_rows, np.int8))),
                                 after.append_column("__side", pa.array(np.ones(after.num_rows, np.int8)))])
        # Keys in Paimon's order (floats as Java's Double.compare); the sort is stable, so the start's
        # row of a key comes before the end's.
        order = merge_sort_indices(both, keys, rows_in_sequence_order=True)
        s = both.take(pa.array(order))
        n = s.num_rows
        side = s.column("__side").to_numpy()
        # The last row of each key has no partner after it; NaN keys pair up, as Paimon's keys do.
        same_key_next = ~key_change_mask(s, keys, np.arange(n))
        paired_with_prev = np.zeros(n, dtype=bool)
        paired_with_prev[1:] = same_key_next[:-1]
        # Rows of the end without a partner in the start: new keys.
        keep = (side == 1) & ~paired_with_prev
        pairs = np.nonzero(same_key_next)[0]
        if len(pairs):
            changed = ~_rows_equal(s, columns, pairs, pairs + 1)
            keep[pairs[changed] + 1] = True
        # A row of the end keeps its merged kind (+I or +U), as Paimon's diff returns it.
        kinds = np.concatenate([np.full(before.num_rows, INSERT, dtype=np.int8), after_kinds])[order]
        if self.keep_delete:
            gone = (side == 0) & ~same_key_next
            keep |= gone
            kinds[gone] = DELETE
        idx = np.nonzero(keep)[0]
        out = s.take(pa.array(idx)).drop_columns(["__side"])
        return out, kinds[idx]

    def _file(self, split: DataSplit, f: DataFileMeta, columns: list[str]) -> pa.Table:
        schema = pa.schema([self._file_schema.field(c) for c in columns])
        return self._reader.read(f"{split.bucket_path}/{f.file_name}", columns, schema, f)

    def _empty(self, columns: list[str]) -> pa.Table:
        return pa.schema([self._file_schema.field(c) for c in columns]).empty_table()


def _rows_equal(table: pa.Table, columns: list[str], left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Whether row left[i] equals row right[i] in every column (nulls equal nulls)."""
    equal = np.ones(len(left), dtype=bool)
    li, ri = pa.array(left), pa.array(right)
    for c in columns:
        col = table.column(c).combine_chunks()
        a, b = col.take(li), col.take(ri)
        if pa.types.is_nested(col.type):
            equal &= np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], dtype=bool)
            continue
        eq = pc.equal(a, b)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        if pa.types.is_floating(col.type):
            both_null = pc.or_(both_null, pc.and_(pc.is_nan(a), pc.is_nan(b)))
        equal &= pc.or_(eq.fill_null(False), both_null).fill_null(False).to_numpy(zero_copy_only=False)
    return equal

