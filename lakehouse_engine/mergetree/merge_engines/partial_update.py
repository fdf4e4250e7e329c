"""The partial-update merge engine: each field takes its latest non-null value, or follows its
sequence group."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakehouse_engine.errors import InvalidDataError, LakehouseError
from lakehouse_engine.mergetree.merge_engines.aggregators import aggregate
from lakehouse_engine.mergetree.merge_engines.groups import KeyGroups, Segments, dense_ranks
from lakehouse_engine.mergetree.merge_engines.merge_options import (
    COUNT,
    MergeOptions,
    SequenceGroup,
)
from lakehouse_engine.mergetree.merge_engines.merged import MergedGroups
from lakehouse_engine.mergetree.merge_engines.ordering import DELETE, INSERT, UPDATE_BEFORE
from lakehouse_engine.options import (
    IGNORE_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
)


def merge_partial_update(groups: KeyGroups, opts: MergeOptions, value_fields: Sequence[str],
                         raw_input: bool) -> MergedGroups:
    """Merge each key's records as Paimon's PartialUpdateMergeFunction.

    Without sequence groups a field takes its last non-null value; retractions are refused
    unless `ignore-delete` dropped them or `partial-update.remove-record-on-delete` is set (a
    -D then removes the row, a -U changes nothing). With sequence groups, see `_SequenceGroups`.
    """
    if not groups.is_add.all() and not opts.handles_retractions:
        raise InvalidDataError(
            f"the partial-update merge engine cannot take -U/-D records "
            f"({int((~groups.is_add).sum())} arrived); either set '{IGNORE_DELETE.key}' to drop them, "
            f"'{PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key}' to remove the row on -D, or sequence "
            f"groups ('fields.<f>.sequence-group') to retract their fields, with "
            f"'{PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key}' to remove the row")
    if opts.sequence_groups:
        return _SequenceGroups(groups, opts, value_fields, raw_input).merge()
    seg = groups.segments
    live = np.ones(groups.n, dtype=bool)
    reset = np.full(groups.count, -1, dtype=np.int64)
    if opts.remove_record_on_delete and groups.is_delete.any():
        reset = seg.last(groups.is_delete)
        live = seg.positions > reset[groups.gids]
    updates = groups.is_add & live
    values = {name: groups.pick(name, seg.last(updates & groups.valid(name)))
              for name in value_fields}
    return _result(groups, values, seg.count(updates) > 0, reset, set(), merged_retractions=False)


def _result(groups: KeyGroups, values: dict[str, pa.Array], updated: np.ndarray, reset: np.ndarray,
            counted: set[str], merged_retractions: bool) -> MergedGroups:
    """Kinds of the results: +I after an insert; else the -D that removed the row, as is; else
    (only retractions) a -U, which changes nothing when merged again and is dropped on read:
    the last -U as is, or with sequence groups (`merged_retractions`) the merged retractions."""
    removed = ~updated & (reset >= 0)
    retracted = ~updated & (reset < 0)
    kinds = np.where(updated, INSERT, np.where(removed, DELETE, UPDATE_BEFORE)).astype(np.int8)
    verbatim = np.where(removed, reset, -1)
    if not merged_retractions:
        verbatim = np.where(retracted, groups.ends, verbatim)
    return MergedGroups(values, kinds, verbatim, counted)


class _SequenceGroups:
    """Partial update with `fields.<seq>.sequence-group` options.

    1. A record updates a group only when its sequence (the group's sequence fields compared in
       order, nulls first) is not smaller than the group's; a record whose sequence fields are
       all null leaves the group alone. The group's state is therefore the running maximum of
       its sequence, and the record that last reached it sets the group's fields (an insert
       its values, even null; a retraction null) and its sequence fields.
    2. With `partial-update.remove-record-on-sequence-group`, a -D that updates a named group
       removes the whole row; the records after it start from an empty row. Removals are found
       key by key, first one first, as each restarts the sequences.
    3. Fields with an aggregate function fold the group's records in sequence order; a
       retraction retracts whatever its sequence (as Paimon does for aggregated fields).
    4. Fields in no group take their last non-null value from the inserts after the removal.
    """

    def __init__(self, groups: KeyGroups, opts: MergeOptions, value_fields: Sequence[str],
                 raw_input: bool):
        self.groups = groups
        self.opts = opts
        self.raw_input = raw_input
        self.value_fields = list(value_fields)
        present = set(value_fields)
        self.active: list[SequenceGroup] = []
        for g in opts.sequence_groups:
            used = [f for f in (*g.fields, *g.sequence_fields) if f in present]
            if not used and not g.removes_record:
                continue
            missing = [f for f in g.sequence_fields if f not in present]
            if missing:
                raise LakehouseError(
                    f"merging fields of sequence group '{g.option}' needs its sequence fields "
                    f"{missing} among the columns (see merge_columns_needed)")
            self.active.append(g)
        self.ranks: dict[str, np.ndarray] = {}
        self.stated: dict[str, np.ndarray] = {}
        for g in self.active:
            columns = [groups.column(f) for f in g.sequence_fields]
            self.ranks[g.option] = dense_ranks(columns)
            stated = np.zeros(groups.n, dtype=bool)
            for f in g.sequence_fields:
                stated |= groups.valid(f)
            self.stated[g.option] = stated

    def merge(self) -> MergedGroups:
        groups, seg = self.groups, self.groups.segments
        reset = self._removals()
        live = seg.positions > reset[groups.gids]
        values: dict[str, pa.Array] = {}
        counted: set[str] = set()
        grouped: set[str] = set()
        for g in self.active:
            fields = [f for f in g.fields if f in self.value_fields]
            grouped.update(fields)
            grouped.update(g.sequence_fields)
            self._merge_group(g, live, fields, values, counted)
        updates = groups.is_add & live
        for name in self.value_fields:
            if name not in grouped:
                values[name] = groups.pick(name, seg.last(updates & groups.valid(name)))
        return _result(groups, values, seg.count(updates) > 0, reset, counted,
                       merged_retractions=True)

    def _applies(self, g: SequenceGroup, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of `g` that take part (stated sequence, live) and those that reach its maximum."""
        rank = self.ranks[g.option]
        taking = self.stated[g.option] & live
        before = self.groups.segments.running_max_before(rank, taking)
        return taking, taking & (rank >= before)

    def _removals(self) -> np.ndarray:
        """Per key: merge-order position of the last -D that removed the row, or -1."""
        groups, seg = self.groups, self.groups.segments
        reset = np.full(groups.count, -1, dtype=np.int64)
        removing = [g for g in self.active if g.removes_record]
        if not removing or not groups.is_delete.any():
            return reset
        while True:
            live = seg.positions > reset[groups.gids]
            hits = np.zeros(groups.n, dtype=bool)
            for g in removing:
                hits |= self._applies(g, live)[1]
            first = seg.first(hits & groups.is_delete)
            found = first >= 0
            if not found.any():
                return reset
            reset[found] = first[found]

    def _merge_group(self, g: SequenceGroup, live: np.ndarray, fields: list[str],
                     values: dict[str, pa.Array], counted: set[str]) -> None:
        groups = self.groups
        taking, applies = self._applies(g, live)
        winner = groups.segments.last(applies)
        for f in g.sequence_fields:
            if f in self.value_fields:
                values[f] = groups.pick(f, winner)
        won_by_insert = np.where(winner >= 0, groups.is_add[np.maximum(winner, 0)], False)
        insert_winner = np.where(won_by_insert, winner, -1)
        ordered: np.ndarray | None = None
        for f in fields:
            if f in g.sequence_fields:
                continue
            agg = self.opts.aggregate_of(f, None)
            if agg is None:
                values[f] = groups.pick(f, insert_winner)
                continue
            if ordered is None:
                rows = np.flatnonzero(taking)
                rank = self.ranks[g.option][rows]
                ordered = rows[np.lexsort((rows, rank, groups.gids[rows]))]
            column = groups.column(f)
            values[f] = aggregate(agg, f, column.take(pa.array(ordered, pa.int64())),
                                  ~groups.is_add[ordered],
                                  Segments(groups.gids[ordered], groups.count), self.raw_input)
            if agg.function == COUNT and self.raw_input:
                counted.add(f)
