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
from lakehouse_engine.options import (
    IGNORE_DELETE,
    MERGE_ENGINE,
    SEQUENCE_FIELD,
    SEQUENCE_FIELD_SORT_ORDER,
    CoreOptions,
)
from lakehouse_engine.schema import VALUE_KIND

# The name the merge order's key boundaries had before the engines moved to `merge_engines`.
_key_change_mask = key_change_mask

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

    def merge(self, table: pa.Table, *, drop_retracts: bool = False,
              rows_in_sequence_order: bool = False, raw_input: bool = False) -> pa.Table:
        """Merge all records of each key into one, sorted by key.

        Args:
            table: key columns, value fields, `_VALUE_KIND` (absent: all inserts) and
                `_SEQUENCE_NUMBER` unless `rows_in_sequence_order` (see `merge_sort_indices`).
            drop_retracts: leave out keys whose merged record is a retraction (-U/-D).
            raw_input: the records are as written (the write buffer), not merged results of
                earlier merges; only `count` tells them apart (a written value counts 1, a merged
                one is a partial count).

        Raises:
            InvalidDataError: a retraction the engine cannot take (partial-update without delete
                handling, an aggregate function that cannot retract).
        """
        if table.num_rows == 0:
            return table
        if self.engine_options is not None:
            return merge_with_engine(
                table, self.key_names, self.engine_options, sequence_fields=self.sequence_fields,
                sequence_descending=self.sequence_descending, ignore_delete=self.ignore_delete,
                drop_retracts=drop_retracts, rows_in_sequence_order=rows_in_sequence_order,
                primary_keys=self.primary_keys, raw_input=raw_input)
        idx = merge_indices(table, self.key_names, self.engine, self.sequence_fields,
                            self.sequence_descending, self.ignore_delete, drop_retracts,
                            rows_in_sequence_order)
        if len(idx) == table.num_rows and bool((idx[1:] > idx[:-1]).all()):
            return table
        return table.take(pa.array(idx))

    def columns_needed(self, columns: Sequence[str]) -> list[str]:
        """`columns` plus the value fields merging them needs (sequence-group sequence fields).

        A reader that projects fields of a partial-update table reads these too; others need none.
        """
        if self.engine_options is None:
            return list(columns)
        return self.engine_options.columns_needed(columns)


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
        ignore_delete=bool(options.get(IGNORE_DELETE)),
        engine_options=(MergeOptions.parse(options, engine) if engine in _BUILDING_ENGINES
                        else None),
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
