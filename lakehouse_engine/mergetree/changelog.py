"""Changelog files: what the `input` and `full-compaction` producers write, and how.

Changelog files are data files in Paimon's KeyValue layout (`_KEY_*`, `_SEQUENCE_NUMBER`,
`_VALUE_KIND`, the fields) named `changelog-<uuid>-<n>.<format>` in the bucket directory; a
snapshot's `changelogManifestList` lists them. Each file holds its records sorted by key, the
records of one key in the order they happened (so a reader replays them in order).

* `input`: the records a writer was given, row kinds as given (Paimon's MergeTreeWriter with
  `changelog-producer = input`): the write buffer's records, unmerged, sorted by (key, sequence).
* `full-compaction`: at a compaction whose output is the top level, per key the compaction saw
  outside the top level (Paimon's FullChangelogMergeFunctionWrapper):
    1. no record at the top level before, the merged record is an insert: `+I` merged;
    2. a record at the top level, the merged record is a retraction (or none): `-D` top;
    3. both, unless `changelog-producer.row-deduplicate` and the values are equal: `-U` top,
       then `+U` merged.
  Keys only at the top level did not change and yield nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import UnsupportedError
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.mergetree.merge_engines.ordering import (
    DELETE,
    INSERT,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    key_change_mask,
    merge_sort_indices,
)
from lakehouse_engine.options import (
    CHANGELOG_PRODUCER,
    CHANGELOG_PRODUCER_ROW_DEDUPLICATE,
    FILE_COMPRESSION,
    CoreOptions,
)
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema

#: The file name prefix of changelog files (Paimon's `changelog-file.prefix` default).
CHANGELOG_FILE_PREFIX = "changelog-"
CHANGELOG_PRODUCER_KEY = CHANGELOG_PRODUCER.key


def changelog_producer(options: CoreOptions) -> str:
    """The table's `changelog-producer` (none, input, lookup, full-compaction), as the option
    system parses and validates it."""
    return options.require(CHANGELOG_PRODUCER)


#: Options of changelog files this engine does not apply: set (to anything but Paimon's default),
#: a write that produces a changelog is refused rather than writing other bytes than asked for.
_NOT_APPLIED = {
    "changelog-file.format": None, "changelog-file.compression": None,
    "changelog-file.prefix": CHANGELOG_FILE_PREFIX, "changelog-file.stats-mode": None,
    "changelog-producer.row-deduplicate-ignore-fields": None,
    "delete.force-produce-changelog": "false",
}


def check_producer_options(options: CoreOptions, table_name: str) -> None:
    """UnsupportedError naming the first changelog option this engine would not apply."""
    for key, default in _NOT_APPLIED.items():
        value = options.raw.get(key)
        if value is not None and value != default:
            if key == "changelog-file.format" and value == options.raw.get("file.format", "parquet"):
                continue  # the data files' format is what changelog files are written in
            if key == "changelog-file.compression" and value.strip().lower() == options.require(FILE_COMPRESSION):
                continue  # and their compression
            raise UnsupportedError(
                f"table {table_name}: option '{key}' = {value!r} is not applied by this engine's "
                f"changelog producers (changelog files follow the data files' format and "
                f"compression and compare every field); remove it "
                f"or write this table with Paimon")


def row_deduplicate(options: CoreOptions) -> bool:
    """`changelog-producer.row-deduplicate`: no -U/+U pair for an update that changes nothing."""
    return options.require(CHANGELOG_PRODUCER_ROW_DEDUPLICATE)


def write_changelog(file_io: FileIO, schema: TableSchema, bucket_dir: str, new_file_name: Callable[[str], str],
                    target_file_size: int, rows: pa.Table, level: int = 0,
                    dictionary: bool | list[str] | None = None) -> list[DataFileMeta]:
    """Write `rows` (fields, `_SEQUENCE_NUMBER`, `_VALUE_KIND`; sorted by key) as changelog files
    (`dictionary`: as `DataFileWriter.write_run`'s)."""
    if rows.num_rows == 0:
        return []
    writer = DataFileWriter(file_io, schema, bucket_dir, new_file_name, target_file_size)
    return writer.write_run(rows, level=level, dictionary=dictionary)


def input_changelog(rows: pa.Table, key_names: Sequence[str]) -> pa.Table:
    """The records as given, sorted by (key, sequence): one key's records stay in input order."""
    order = merge_sort_indices(rows, key_names, rows_in_sequence_order=True)
    if len(order) and bool((order[1:] > order[:-1]).all()):
        return rows
    return rows.take(pa.array(order))


def full_compaction_changelog(rows: pa.Table, at_top: np.ndarray, merged: pa.Table,
                              key_names: Sequence[str], value_columns: Sequence[str],
                              row_deduplicate: bool) -> pa.Table:
    """The changelog of one full-compaction merge.

    Args:
        rows: every record the compaction read (key columns, values, `_SEQUENCE_NUMBER`,
            `_VALUE_KIND`).
        at_top: per row of `rows`, whether it came from the top level (one record per key).
        merged: the merge of `rows` per key, sorted by key, retractions kept (`_VALUE_KIND`).
        value_columns: the columns compared for `row_deduplicate` (every field).
    """
    columns = list(merged.column_names)
    top = rows.filter(pa.array(at_top)).select(columns)
    upper_keys = rows.filter(pa.array(~at_top)).select(list(key_names))
    if upper_keys.num_rows == 0:
        return merged.schema.empty_table()
    # Keys of the three sides in one sorted table: the top's records, the merged records, and
    # the keys touched outside the top; `__row` points back into `top` or `merged`.
    touched = _distinct(upper_keys, key_names)
    parts = []
    for side, keys in ((0, top.select(list(key_names))), (1, merged.select(list(key_names))), (2, touched)):
        parts.append(keys.append_column("__side", pa.array(np.full(keys.num_rows, side, np.int8)))
                     .append_column("__row", pa.array(np.arange(keys.num_rows, dtype=np.int64))))
    both = pa.concat_tables(parts, promote_options="permissive")
    # Keys in Paimon's order (floats as Java's Double.compare: -0.0 and 0.0 two keys, NaN one);
    # the sort is stable, so within a key the sides keep their order 0, 1, 2.
    order = merge_sort_indices(both, key_names, rows_in_sequence_order=True)
    s = both.take(pa.array(order))
    n = s.num_rows
    sides = s.column("__side").to_numpy()
    source_row = s.column("__row").to_numpy()
    group_start = np.ones(n, dtype=bool)
    group_start[1:] = key_change_mask(s, key_names, np.arange(n))[:-1]
    group = np.cumsum(group_start) - 1
    groups = int(group[-1]) + 1 if n else 0
    top_row = np.full(groups, -1, dtype=np.int64)
    merged_row = np.full(groups, -1, dtype=np.int64)
    is_touched = np.zeros(groups, dtype=bool)
    top_row[group[sides == 0]] = source_row[sides == 0]
    merged_row[group[sides == 1]] = source_row[sides == 1]
    is_touched[group[sides == 2]] = True
    merged_kinds = merged.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
    has_top = top_row >= 0
    merged_add = np.zeros(groups, dtype=bool)
    have = merged_row >= 0
    merged_add[have] = np.isin(merged_kinds[merged_row[have]], (INSERT, UPDATE_AFTER))
    new = is_touched & ~has_top & merged_add           # 1. +I merged
    gone = is_touched & has_top & ~merged_add          # 2. -D top
    updated = is_touched & has_top & merged_add        # 3. -U top, +U merged
    if row_deduplicate and updated.any():
        idx = np.nonzero(updated)[0]
        equal = _rows_equal(top.take(pa.array(top_row[idx])), merged.take(pa.array(merged_row[idx])),
                            list(value_columns))
        updated[idx[equal]] = False
    before_groups = np.nonzero(gone | updated)[0]
    after_groups = np.nonzero(new | updated)[0]
    before = top.take(pa.array(top_row[before_groups]))
    after = merged.take(pa.array(merged_row[after_groups]))
    kinds = np.concatenate([np.where(gone[before_groups], DELETE, UPDATE_BEFORE).astype(np.int8),
                            np.where(new[after_groups], INSERT, UPDATE_AFTER).astype(np.int8)])
    # Key order, and within a key the row before the change first.
    rank = np.concatenate([before_groups * 2, after_groups * 2 + 1])
    out = pa.concat_tables([before, after]).take(pa.array(np.argsort(rank, kind="stable")))
    return out.set_column(out.column_names.index(VALUE_KIND), merged.schema.field(VALUE_KIND),
                          pa.array(kinds[np.argsort(rank, kind="stable")], pa.int8()))


def lookup_changelog(new: pa.Table, old_records: pa.Table, key_names: Sequence[str],
                     merge: Callable[[pa.Table], pa.Table], value_columns: Sequence[str],
                     row_deduplicate: bool, first_row: bool = False) -> pa.Table:
    """The `lookup` producer's changelog of one flushed run (Paimon's LookupChangelogMergeFunctionWrapper).

    `new` holds the run's records (one per key, merged within the write); `old_records` every
    record of those keys in the bucket's older files, in merge order; `merge` merges records per
    key keeping retractions. Per key of `new`: no live old row and an insert: `+I`; a live old
    row and a retraction: `-D` old; both live: `-U` old, `+U` merged (not when row-deduplicate
    finds them equal); a retraction of an absent key: nothing. first-row: `+I` for new keys only.
    """
    columns = list(new.column_names)
    merged_old = merge(old_records) if old_records.num_rows else old_records
    merged_old = merged_old.select(columns).cast(new.schema)
    old = merged_old
    if old.num_rows:
        kinds = old.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
        old = old.filter(pa.array(np.isin(kinds, (INSERT, UPDATE_AFTER))))
    rows = pa.concat_tables([old, new])
    at_top = np.concatenate([np.ones(old.num_rows, bool), np.zeros(new.num_rows, bool)])
    # The row after: every record of the key merged, the older records one by one, as the read
    # and the compaction merge them (with `sequence.field` a new record may sort between two older
    # ones, which their merged row, ordered by its largest sequence, would put after it), a
    # retraction kept too (an aggregation's `-D` of a key it had not seen retracts from what comes
    # after); the row before: the older records' merge where it is a row.
    older = old_records.select(columns).cast(new.schema) if old_records.num_rows else merged_old
    merged = merge(pa.concat_tables([older, new]))
    out = full_compaction_changelog(rows, at_top, merged, key_names, value_columns, row_deduplicate)
    if first_row and out.num_rows:
        out = out.filter(pc.equal(out.column(VALUE_KIND), INSERT))
    return out


def newest_changelog(new: pa.Table, key_index: np.ndarray, old: pa.Table, value_columns: Sequence[str],
                     row_deduplicate: bool) -> pa.Table:
    """The `lookup` producer's changelog where a key's newest record is its row (deduplicate
    without sequence fields): what `lookup_changelog` gives, with no merge.

    `new` is the run (one record per key, sorted by key); `old` the newest older record of each
    key `key_index` (indices into `new`) found, retractions included. Per key of `new`: a live old
    row and an insert: `-U` old, `+U` new (neither when row-deduplicate finds them equal); a live
    old row and a retraction: `-D` old; no live old row and an insert: `+I` new; else nothing.
    """
    n = new.num_rows
    new_add = _adds(new)
    old_live = _adds(old) if old.num_rows else np.zeros(0, bool)
    old_of = np.full(n, -1, np.int64)  # per row of `new`: its live old row
    old_of[key_index[old_live]] = np.flatnonzero(old_live)
    has_old = old_of >= 0
    before, after = has_old.copy(), new_add.copy()
    if row_deduplicate:
        both = np.flatnonzero(has_old & new_add)
        if len(both):
            equal = _rows_equal(old.take(pa.array(old_of[both])), new.take(pa.array(both)),
                                list(value_columns))
            before[both[equal]] = after[both[equal]] = False
    # Per key its row before the change, then its row after: one gather from [old, new].
    count = before.astype(np.int64) + after
    total = int(count.sum())
    if total == 0:
        return new.schema.empty_table()
    start = np.cumsum(count) - count
    source = np.empty(total, np.int64)
    kinds = np.empty(total, np.int8)
    b = np.flatnonzero(before)
    source[start[b]] = old_of[b]
    kinds[start[b]] = np.where(new_add[b], UPDATE_BEFORE, DELETE)
    a = np.flatnonzero(after)
    at = start[a] + before[a]
    source[at] = old.num_rows + a
    kinds[at] = np.where(has_old[a], UPDATE_AFTER, INSERT)
    rows = pa.concat_tables([old.select(new.column_names).cast(new.schema), new])
    out = rows.take(pa.array(source))
    return out.set_column(out.column_names.index(VALUE_KIND), new.schema.field(VALUE_KIND),
                          pa.array(kinds, pa.int8()))


def _kinds(rows: pa.Table) -> np.ndarray:
    return rows.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)


def _adds(rows: pa.Table) -> np.ndarray:
    """Per row, whether it adds its key (+I or +U): two comparisons, a fifth of `np.isin`'s cost."""
    kinds = _kinds(rows)
    return (kinds == INSERT) | (kinds == UPDATE_AFTER)


def records_of_keys(keys: pa.Table, files: Sequence[DataFileMeta],
                    read_file: Callable[[DataFileMeta], pa.Table], key_names: Sequence[str],
                    may_hold: Callable[[DataFileMeta], bool] | None = None,
                    levels: list[np.ndarray] | None = None) -> pa.Table | None:
    """Every record of `keys` in `files` (read in the order given), None when there is none;
    `may_hold` skips files whose key range cannot hold any of them; `levels` (given) receives per
    file read, for its records, the file's level."""
    wanted = _distinct(keys.select(list(key_names)), key_names)
    parts = []
    for f in files:
        if may_hold is not None and not may_hold(f):
            continue
        rows = read_file(f)
        marked = rows.append_column("\x00position", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
        hit = marked.join(wanted, list(key_names), join_type="left semi", use_threads=False)
        if hit.num_rows:
            order = np.sort(hit.column("\x00position").to_numpy())
            parts.append(rows.take(pa.array(order)))
            if levels is not None:
                levels.append(np.full(len(order), f.level, np.int64))
    if not parts:
        return None
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _distinct(keys: pa.Table, key_names: Sequence[str]) -> pa.Table:
    return keys.group_by(list(key_names), use_threads=False).aggregate([])


def _rows_equal(left: pa.Table, right: pa.Table, columns: list[str]) -> np.ndarray:
    """Whether row i of `left` equals row i of `right` in every column (nulls equal nulls, NaN NaN)."""
    equal = np.ones(left.num_rows, dtype=bool)
    for c in columns:
        col = left.column(c)
        a, b = col.combine_chunks(), right.column(c).combine_chunks()
        if pa.types.is_nested(col.type):
            equal &= np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], dtype=bool)
            continue
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        if pa.types.is_floating(col.type):
            both_null = pc.or_(both_null, pc.and_(pc.is_nan(a), pc.is_nan(b)))
        same = pc.or_(pc.equal(a, b).fill_null(False), both_null).fill_null(False)
        equal &= same.to_numpy(zero_copy_only=False)
    return equal


__all__ = ["CHANGELOG_FILE_PREFIX", "SEQUENCE_NUMBER", "full_compaction_changelog", "input_changelog",
           "lookup_changelog", "newest_changelog", "records_of_keys", "write_changelog"]
