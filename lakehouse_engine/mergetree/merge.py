"""Merge functions over sorted key/value tables, vectorised: all four of Paimon's merge engines.

`deduplicate` and `first-row` select one record per key (`merge_indices`); `partial-update`
and `aggregation` build a new record per key (`merge_engines`). A table's `MergeFunction`
(`build_merge_function`, once per table) does either, so the write buffer, merge-on-read and
compaction merge the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse_engine.errors import InvalidDataError, UnsupportedError
from lakehouse_engine.mergetree.lookup_merge import latest_above_level0_mask, needs_lookup_merge
from lakehouse_engine.mergetree.merge_engines import (
    AGGREGATE_FUNCTIONS,
    MergeOptions,
    merge_with_engine,
    validate_merge_options,
)
from lakehouse_engine.mergetree.merge_engines.ordering import (
    DELETE,
    INSERT,
    ROW_KIND_CODES,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    in_order_key,
    key_change_mask,
    merge_sort_indices,
)
from lakehouse_engine.options import (
    IGNORE_DELETE,
    MERGE_ENGINE,
    SEQUENCE_FIELD,
    SEQUENCE_FIELD_SORT_ORDER,
    CoreOptions,
)
from lakehouse_engine.schema import VALUE_KIND
from lakehouse_engine.threads import parallel_map

__all__ = [
    "AGGREGATE_FUNCTIONS", "DELETE", "INSERT", "ROW_KIND_CODES", "UPDATE_AFTER", "UPDATE_BEFORE",
    "MergeFunction", "build_merge_function", "merge_columns_needed", "merge_indices", "merge_records",
    "merge_sort_indices",
    "validate_merge_options",
]

_SELECTING_ENGINES = ("deduplicate", "first-row")
_BUILDING_ENGINES = ("partial-update", "aggregation")


def merge_indices(table: pa.Table, key_names: Sequence[str], merge_engine: str = "deduplicate",
                  sequence_fields: Sequence[str] = (), sequence_descending: bool = False,
                  ignore_delete: bool = False, drop_retracts: bool = False,
                  rows_in_sequence_order: bool = False) -> np.ndarray:
    """Row indices of the merged result, sorted by key: one row per key, chosen by the merge engine.

    `table` holds the key columns, `_VALUE_KIND` when it may hold retractions (absent: all inserts)
    and `_SEQUENCE_NUMBER` unless `rows_in_sequence_order` (see `merge_sort_indices`).
    """
    if VALUE_KIND in table.column_names:
        kinds = table.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
    else:
        kinds = np.zeros(table.num_rows, dtype=np.int8)
    # Every row an insert (the common case): no retraction to filter out.
    all_inserts = not kinds.any()
    key = in_order_key(table, key_names, sequence_fields, rows_in_sequence_order)
    if key is not None:
        # One numeric key, rows in sequence order: the order and the key boundaries both come
        # from one NumPy copy of the key, read once.
        order = np.argsort(key, kind="stable")
    else:
        order = merge_sort_indices(table, key_names, sequence_fields, sequence_descending,
                                   rows_in_sequence_order)
    if merge_engine == "first-row" and not ignore_delete and not all_inserts:
        retracts = int(((kinds == UPDATE_BEFORE) | (kinds == DELETE)).sum())
        if retracts:
            # Paimon's FirstRowMergeFunction refuses them: a first row is never retracted.
            raise InvalidDataError(f"the first-row merge engine cannot take -U/-D records ({retracts} "
                                   f"arrived); set '{IGNORE_DELETE.key}' = 'true' to drop them")
    if (ignore_delete or merge_engine == "first-row") and not all_inserts:
        sorted_kinds = kinds[order]
        order = order[(sorted_kinds == INSERT) | (sorted_kinds == UPDATE_AFTER)]
    if len(order) == 0:
        return order
    if key is not None:
        sorted_key = key[order]
        last = np.empty(len(order), dtype=bool)
        np.not_equal(sorted_key[1:], sorted_key[:-1], out=last[:-1])
        last[-1] = True
    else:
        last = key_change_mask(table, key_names, order)
    if merge_engine == "deduplicate":
        chosen = last
    elif merge_engine == "first-row":
        chosen = np.roll(last, 1)
        chosen[0] = True
    else:
        raise UnsupportedError(f"merge-engine '{merge_engine}' is not supported yet")
    result = order[chosen]
    if drop_retracts and not all_inserts:
        k = kinds[result]
        result = result[(k == INSERT) | (k == UPDATE_AFTER)]
    return result


@dataclass(frozen=True)
class MergeFunction:
    """How the records of one key merge in one table: built once per table from its options
    (`build_merge_function`) and shared by the write buffer, merge-on-read and compaction, so all
    three merge alike (Paimon's MergeFunction)."""

    engine: str
    key_names: tuple[str, ...]
    primary_keys: tuple[str, ...] = ()
    sequence_fields: tuple[str, ...] = ()
    sequence_descending: bool = False
    ignore_delete: bool = False
    # partial-update and aggregation only: their per-field options, parsed once.
    engine_options: MergeOptions | None = None
    #: A table that needs lookups with a merging engine: records from files above level 0 count
    #: only the latest of their key (Paimon's LookupMergeFunction, `mergetree.lookup_merge`).
    lookup: bool = False

    def lookup_candidates(self, table: pa.Table, levels: np.ndarray,
                          rows_in_sequence_order: bool = False) -> pa.Table:
        """`table`'s records a merge takes (`levels`: per row, its file's level): all of them, or
        for a `lookup` merge function LookupMergeFunction's candidates (`mergetree.lookup_merge`)."""
        keep = self.lookup_mask(table, levels, rows_in_sequence_order)
        return table if keep is None else table.filter(pa.array(keep))

    def lookup_mask(self, table: pa.Table, levels: np.ndarray,
                    rows_in_sequence_order: bool = False) -> np.ndarray | None:
        """The rows `lookup_candidates` keeps, as a mask; None when it keeps them all."""
        if not self.lookup:
            return None
        return latest_above_level0_mask(table, levels, self.key_names, self.sequence_fields,
                                        self.sequence_descending, rows_in_sequence_order)

    def merge(self, table: pa.Table, *, drop_retracts: bool = False,
              rows_in_sequence_order: bool = False, raw_input: bool = False,
              columns: Sequence[str] | None = None, threads: int = 1) -> pa.Table:
        """Merge all records of each key into one, sorted by key.

        Args:
            table: key columns, value fields, `_VALUE_KIND` (absent: all inserts) and
                `_SEQUENCE_NUMBER` unless `rows_in_sequence_order` (see `merge_sort_indices`).
            drop_retracts: leave out keys whose merged record is a retraction (-U/-D).
            raw_input: the records are as written (the write buffer), not merged results of
                earlier merges; only `count` tells them apart (a written value counts 1, a merged
                one is a partial count).
            columns: the columns the caller keeps (default all): a selecting engine gathers
                only these, the others it reads only to decide.
            threads: gather the columns of a large merged result on this many threads.

        Raises:
            InvalidDataError: a retraction the engine cannot take (partial-update without delete
                handling, an aggregate function that cannot retract).
        """
        if table.num_rows == 0:
            return table if columns is None else table.select(list(columns))
        if self.engine_options is not None:
            merged = merge_with_engine(
                table, self.key_names, self.engine_options, sequence_fields=self.sequence_fields,
                sequence_descending=self.sequence_descending, ignore_delete=self.ignore_delete,
                drop_retracts=drop_retracts, rows_in_sequence_order=rows_in_sequence_order,
                primary_keys=self.primary_keys, raw_input=raw_input)
            return merged if columns is None else merged.select(list(columns))
        idx = merge_indices(table, self.key_names, self.engine, self.sequence_fields,
                            self.sequence_descending, self.ignore_delete, drop_retracts,
                            rows_in_sequence_order)
        if columns is not None:
            # The key, kind and sequence columns decided the rows; only the kept ones are copied.
            table = table.select(list(columns))
        if len(idx) == table.num_rows and bool((idx[1:] > idx[:-1]).all()):
            return table
        return take_rows(table, idx, threads)

    def columns_needed(self, columns: Sequence[str]) -> list[str]:
        """`columns` plus the value fields merging them needs (sequence-group sequence fields).

        A reader that projects fields of a partial-update table reads these too; others need none.
        """
        if self.engine_options is None:
            return list(columns)
        return self.engine_options.columns_needed(columns)


# Below this many rows a gather is too quick to be worth threads.
_THREADED_TAKE_ROWS = 1 << 17


def take_rows(table: pa.Table, indices: np.ndarray, threads: int = 1) -> pa.Table:
    """`table.take(indices)`; with `threads` > 1 and many rows, columns are gathered at once
    (Arrow's take releases the GIL)."""
    idx = pa.array(indices)
    if threads <= 1 or len(indices) < _THREADED_TAKE_ROWS or table.num_columns < 2:
        return table.take(idx)
    columns = parallel_map(lambda c: c.take(idx), table.columns, threads)
    return pa.Table.from_arrays(columns, schema=table.schema)


def build_merge_function(options: CoreOptions, key_names: Sequence[str],
                         primary_keys: Sequence[str] = ()) -> MergeFunction:
    """The merge function of a table with these options, merging on `key_names` (the primary key
    minus partition fields); `primary_keys` beyond them are carried, never aggregated.

    Raises:
        InvalidOptionError, UnsupportedError: malformed or unsupported merge options.
    """
    engine = options.require(MERGE_ENGINE)
    if engine not in _SELECTING_ENGINES and engine not in _BUILDING_ENGINES:
        raise UnsupportedError(f"merge-engine '{engine}' is not supported yet")
    return MergeFunction(
        engine=engine,
        key_names=tuple(key_names),
        primary_keys=tuple(primary_keys),
        sequence_fields=tuple(options.sequence_fields),
        sequence_descending=options.require(SEQUENCE_FIELD_SORT_ORDER) == "descending",
        ignore_delete=options.require(IGNORE_DELETE),
        engine_options=(MergeOptions.parse(options, engine) if engine in _BUILDING_ENGINES
                        else None),
        lookup=needs_lookup_merge(options),
    )


def merge_records(table: pa.Table, key_names: Sequence[str], merge_engine: str = "deduplicate", *,
                  sequence_fields: Sequence[str] = (), sequence_descending: bool = False,
                  ignore_delete: bool = False, drop_retracts: bool = False,
                  rows_in_sequence_order: bool = False, options: CoreOptions | None = None,
                  primary_keys: Sequence[str] = (), raw_input: bool = False) -> pa.Table:
    """One-off merge of `table` (tests and tools): `MergeFunction.merge` with a merge function
    built for this call. Engine code builds its table's merge function once instead."""
    raw = dict(options.raw) if options is not None else {}
    raw[MERGE_ENGINE.key] = merge_engine
    if sequence_fields:
        raw[SEQUENCE_FIELD.key] = ",".join(sequence_fields)
    if sequence_descending:
        raw[SEQUENCE_FIELD_SORT_ORDER.key] = "descending"
    if ignore_delete:
        raw[IGNORE_DELETE.key] = "true"
    function = build_merge_function(CoreOptions(raw), key_names, primary_keys)
    return function.merge(table, drop_retracts=drop_retracts,
                          rows_in_sequence_order=rows_in_sequence_order, raw_input=raw_input)


def merge_columns_needed(options: CoreOptions, columns: Sequence[str]) -> list[str]:
    """`columns` plus the value fields merging them needs (see `MergeFunction.columns_needed`)."""
    return build_merge_function(options, ()).columns_needed(columns)
