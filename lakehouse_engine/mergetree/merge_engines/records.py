"""Merge records with the partial-update or aggregation engine into one record per key."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import UnsupportedError
from lakehouse_engine.mergetree.merge_engines.aggregation import merge_aggregation
from lakehouse_engine.mergetree.merge_engines.aggregators import count_contribution
from lakehouse_engine.mergetree.merge_engines.groups import KeyGroups
from lakehouse_engine.mergetree.merge_engines.merge_options import (
    AGGREGATION,
    PARTIAL_UPDATE,
    MergeOptions,
)
from lakehouse_engine.mergetree.merge_engines.merged import MergedGroups
from lakehouse_engine.mergetree.merge_engines.ordering import INSERT, UPDATE_AFTER
from lakehouse_engine.mergetree.merge_engines.partial_update import merge_partial_update
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND


def merge_with_engine(table: pa.Table, key_names: Sequence[str], opts: MergeOptions, *,
                      sequence_fields: Sequence[str], sequence_descending: bool, ignore_delete: bool,
                      drop_retracts: bool, rows_in_sequence_order: bool,
                      primary_keys: Sequence[str], raw_input: bool) -> pa.Table:
    """One record per key, sorted by key, merged by the partial-update or aggregation engine.

    `opts` are the table's merge options, parsed once (`MergeOptions.parse`). The result has
    `table`'s columns: keys and `primary_keys` from the key's last record, `_SEQUENCE_NUMBER`
    the largest merged, `_VALUE_KIND` +I or the retraction the result is.
    """
    merge_engine = opts.engine
    if merge_engine not in (PARTIAL_UPDATE, AGGREGATION):
        raise UnsupportedError(f"merge-engine '{merge_engine}' is not supported")
    groups = KeyGroups(table, key_names, sequence_fields, sequence_descending, rows_in_sequence_order,
                       ignore_delete or opts.ignore_delete)
    if groups.n == 0:
        return table.slice(0, 0)
    carried = {*key_names, *primary_keys, SEQUENCE_NUMBER, VALUE_KIND}
    carried.update(c for c in table.column_names if c.startswith(KEY_FIELD_PREFIX))
    value_fields = [c for c in table.column_names if c not in carried]
    if merge_engine == AGGREGATION:
        merged = merge_aggregation(groups, opts, value_fields, sequence_fields, raw_input)
    else:
        merged = merge_partial_update(groups, opts, value_fields, raw_input)
    result = _assemble(table, groups, merged, carried)
    if drop_retracts and VALUE_KIND in result.column_names:
        kinds = result.column(VALUE_KIND).to_numpy()
        keep = (kinds == INSERT) | (kinds == UPDATE_AFTER)
        if not keep.all():
            result = result.filter(pa.array(keep))
    return result


def _assemble(table: pa.Table, groups: KeyGroups, merged: MergedGroups, carried: set[str]) -> pa.Table:
    """The result table: a lone record of a key passes through unchanged, as in Paimon."""
    verbatim = merged.verbatim.copy()
    lone = groups.sizes == 1
    verbatim[lone] = groups.starts[lone]
    as_is = verbatim >= 0
    as_is_mask = pa.array(as_is) if as_is.any() else None
    columns: list[pa.Array] = []
    for f in table.schema:
        if f.name == SEQUENCE_NUMBER:
            seq = groups.table.column(SEQUENCE_NUMBER).to_numpy()[groups.order]
            columns.append(pa.array(np.maximum.reduceat(seq, groups.starts), f.type))
        elif f.name == VALUE_KIND:
            kinds = np.where(as_is, groups.kinds[np.maximum(verbatim, 0)], merged.kinds)
            columns.append(pa.array(kinds.astype(np.int8), f.type))
        elif f.name in carried:
            columns.append(groups.pick(f.name, groups.ends))
        else:
            value = merged.values[f.name]
            if as_is_mask is not None:
                record = groups.pick(f.name, verbatim)
                if f.name in merged.counted:
                    record = count_contribution(record)
                value = pc.if_else(as_is_mask, record, value)
            if value.null_count and not f.nullable:
                # A removed or retracted row keeps NOT NULL fields from its last record, as
                # Paimon's initRow does, so that the file can hold it.
                value = pc.coalesce(value, groups.pick(f.name, groups.ends))
            columns.append(value if value.type == f.type else value.cast(f.type, safe=False))
    return pa.Table.from_arrays(columns, schema=table.schema)
