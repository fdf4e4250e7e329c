"""The aggregation merge engine: every value field folds the records of a key with its function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakehouse_engine.mergetree.merge_engines.aggregators import aggregate
from lakehouse_engine.mergetree.merge_engines.groups import KeyGroups, Segments
from lakehouse_engine.mergetree.merge_engines.merge_options import (
    COUNT,
    LAST_NON_NULL_VALUE,
    MergeOptions,
)
from lakehouse_engine.mergetree.merge_engines.merged import MergedGroups
from lakehouse_engine.mergetree.merge_engines.ordering import DELETE, INSERT


def merge_aggregation(groups: KeyGroups, opts: MergeOptions, value_fields: Sequence[str],
                      sequence_fields: Sequence[str], raw_input: bool) -> MergedGroups:
    """Aggregate each key's records field by field, as Paimon's AggregateMergeFunction.

    1. With `aggregation.remove-record-on-delete`, a -D removes the row: only the records after
       a key's last -D count, and a key whose last record is a -D results in that -D.
    2. Every other -U/-D retracts from each field's aggregate (see `aggregators`).
    3. `sequence.field` fields are not aggregated: they keep the last record's value.
    """
    seg = groups.segments
    kinds = np.full(groups.count, INSERT, dtype=np.int8)
    verbatim = np.full(groups.count, -1, dtype=np.int64)
    live = np.ones(groups.n, dtype=bool)
    if opts.remove_record_on_delete and groups.is_delete.any():
        last_delete = seg.last(groups.is_delete)
        live = seg.positions > last_delete[groups.gids]
        removed = last_delete == groups.ends
        kinds[removed] = DELETE
        verbatim[removed] = last_delete[removed]
    if live.all():
        live_seg, rows = seg, None
    else:
        rows = np.flatnonzero(live)
        live_seg = Segments(groups.gids[rows], groups.count)
    retract = ~groups.is_add if rows is None else ~groups.is_add[rows]
    values: dict[str, pa.Array] = {}
    counted: set[str] = set()
    for name in value_fields:
        if name in sequence_fields:
            values[name] = groups.pick(name, groups.ends)
            continue
        agg = opts.aggregate_of(name, LAST_NON_NULL_VALUE)
        assert agg is not None
        column = groups.column(name)
        live_values = column if rows is None else column.take(pa.array(rows, pa.int64()))
        values[name] = aggregate(agg, name, live_values, retract, live_seg, raw_input)
        if agg.function == COUNT and raw_input:
            counted.add(name)
    return MergedGroups(values, kinds, verbatim, counted)
