"""Merge functions over sorted key/value tables, vectorised: all four of Paimon's merge engines.

`deduplicate` and `first-row` select one record per key (`merge_indices`); `partial-update`
and `aggregation` build a new record per key (`merge_engines`). `merge_records` does either,
so the write buffer, merge-on-read and compaction merge the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakehouse_engine.errors import UnsupportedError
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
    key_change_mask,
    merge_sort_indices,
)
from lakehouse_engine.options import CoreOptions
from lakehouse_engine.schema import VALUE_KIND

# The name the merge order's key boundaries had before the engines moved to `merge_engines`.
_key_change_mask = key_change_mask

__all__ = [
    "AGGREGATE_FUNCTIONS", "DELETE", "INSERT", "ROW_KIND_CODES", "UPDATE_AFTER", "UPDATE_BEFORE",
    "merge_columns_needed", "merge_indices", "merge_records", "merge_sort_indices",
    "validate_merge_options",
]

_SELECTING_ENGINES = ("deduplicate", "first-row")


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
    order = merge_sort_indices(table, key_names, sequence_fields, sequence_descending,
                               rows_in_sequence_order)
    if ignore_delete or merge_engine == "first-row":
        sorted_kinds = kinds[order]
        order = order[(sorted_kinds == INSERT) | (sorted_kinds == UPDATE_AFTER)]
    if len(order) == 0:
        return order
    last = key_change_mask(table, key_names, order)
    if merge_engine == "deduplicate":
        chosen = last
    elif merge_engine == "first-row":
        chosen = np.roll(last, 1)
        chosen[0] = True
    else:
        raise UnsupportedError(f"merge-engine '{merge_engine}' is not supported yet")
    result = order[chosen]
    if drop_retracts:
        k = kinds[result]
        result = result[(k == INSERT) | (k == UPDATE_AFTER)]
    return result


def merge_records(table: pa.Table, key_names: Sequence[str], merge_engine: str = "deduplicate",
                  sequence_fields: Sequence[str] = (), sequence_descending: bool = False,
                  ignore_delete: bool = False, drop_retracts: bool = False,
                  rows_in_sequence_order: bool = False, *, options: CoreOptions | None = None,
                  primary_keys: Sequence[str] = (), raw_input: bool = False) -> pa.Table:
    """Merge all records of each key into one, sorted by key; optionally drop the retracting results.

    Args:
        table: key columns, value fields, `_VALUE_KIND` (absent: all inserts) and
            `_SEQUENCE_NUMBER` unless `rows_in_sequence_order` (see `merge_sort_indices`).
        options: the table's options; partial-update and aggregation read their per-field
            options (`fields.<f>.aggregate-function`, sequence groups, ...) from `options.raw`.
        primary_keys: the whole primary key; fields of it beyond `key_names` (partition fields,
            constant within a bucket) are carried, never aggregated.
        raw_input: the records are as written (the write buffer), not merged results of earlier
            merges; only `count` tells them apart (a written value counts 1, a merged one is a
            partial count).

    Raises:
        InvalidDataError: a retraction the engine cannot take (partial-update without delete
            handling, an aggregate function that cannot retract).
        InvalidOptionError, UnsupportedError: malformed or unsupported merge options.
    """
    if table.num_rows == 0:
        return table
    if merge_engine not in _SELECTING_ENGINES:
        return merge_with_engine(table, key_names, merge_engine, sequence_fields, sequence_descending,
                                 ignore_delete, drop_retracts, rows_in_sequence_order,
                                 options.raw if options is not None else {}, primary_keys, raw_input)
    idx = merge_indices(table, key_names, merge_engine, sequence_fields, sequence_descending,
                        ignore_delete, drop_retracts, rows_in_sequence_order)
    if len(idx) == table.num_rows and bool((idx[1:] > idx[:-1]).all()):
        return table
    return table.take(pa.array(idx))


def merge_columns_needed(options: CoreOptions, columns: Sequence[str]) -> list[str]:
    """`columns` plus the value fields merging them needs (sequence-group sequence fields).

    A reader that projects fields of a partial-update table reads these too; others need none.
    """
    engine = options.raw.get("merge-engine", "deduplicate")
    if engine in _SELECTING_ENGINES:
        return list(columns)
    return MergeOptions.parse(options.raw, engine).columns_needed(columns)
