"""Records in merge order cut into key groups, and the vectorised per-group primitives on them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.mergetree.merge_engines.ordering import (
    DELETE,
    INSERT,
    UPDATE_AFTER,
    key_change_mask,
    merge_sort_indices,
)
from lakehouse_engine.schema import VALUE_KIND


class Segments:
    """Rows labelled with a non-decreasing group id in [0, groups); a group may have no rows.

    Every reduction is a NumPy `ufunc.reduceat` over the runs of equal ids, scattered back to
    one value per group, so no Python code runs per row or per group.
    """

    def __init__(self, gids: np.ndarray, groups: int):
        self.gids = gids
        self.groups = groups
        n = len(gids)
        self.starts = np.flatnonzero(np.r_[True, gids[1:] != gids[:-1]]) if n else np.zeros(0, np.int64)
        self.present = gids[self.starts] if n else np.zeros(0, np.int64)
        self.positions = np.arange(n, dtype=np.int64)

    def reduce(self, ufunc: np.ufunc, values: np.ndarray, fill: int | float | bool) -> np.ndarray:
        """`ufunc` folded over each group's rows; `fill` for groups without rows."""
        out = np.full(self.groups, fill, dtype=values.dtype)
        if len(values):
            out[self.present] = ufunc.reduceat(values, self.starts)
        return out

    def last(self, mask: np.ndarray) -> np.ndarray:
        """Position of the last row of each group where `mask` holds, or -1."""
        return self.reduce(np.maximum, np.where(mask, self.positions, -1), -1)

    def first(self, mask: np.ndarray) -> np.ndarray:
        """Position of the first row of each group where `mask` holds, or -1."""
        n = len(self.gids)
        first = self.reduce(np.minimum, np.where(mask, self.positions, n), n)
        first[first == n] = -1
        return first

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Rows of each group where `mask` holds."""
        return self.reduce(np.add, mask.astype(np.int64), 0)

    def running_max_before(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Per row: the largest of `values` (>= 0) over earlier rows of its group where `mask`
        holds, or -1. One cumulative max over the whole array: each group's values are lifted
        above every earlier group's, so the maximum restarts at each group boundary."""
        n = len(values)
        if n == 0:
            return np.zeros(0, np.int64)
        span = int(values.max(initial=0)) + 2
        lifted = np.where(mask, values + 1, 0) + self.gids * span
        running = np.maximum.accumulate(lifted) - self.gids * span - 1
        before = np.empty(n, np.int64)
        before[0] = -1
        before[1:] = running[:-1]
        before[self.starts] = -1
        return before


def pick(column: pa.Array, positions: np.ndarray) -> pa.Array:
    """`column[positions]`, null where a position is -1."""
    missing = positions < 0
    if not missing.any():
        return column.take(pa.array(positions, pa.int64()))
    return column.take(pa.array(np.where(missing, 0, positions), pa.int64(), mask=missing))


def dense_ranks(columns: Sequence[pa.Array]) -> np.ndarray:
    """Per row: its rank among the distinct tuples of `columns` (ascending, nulls first), from 0."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, np.int64)
    data: dict[str, pa.Array] = {}
    sort_keys = []
    for i, col in enumerate(columns):
        # Nulls first: sort on "is valid" before the value itself.
        data[f"v{i}"] = col.is_valid()
        data[f"c{i}"] = col
        sort_keys += [(f"v{i}", "ascending"), (f"c{i}", "ascending")]
    order = pc.sort_indices(pa.table(data), sort_keys=sort_keys).to_numpy()
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for col in columns:
        s = col.take(pa.array(order))
        a, b = s.slice(1), s.slice(0, n - 1)
        differ = pc.fill_null(pc.not_equal(a, b), True).to_numpy(zero_copy_only=False)
        both_null = (~a.is_valid().to_numpy(zero_copy_only=False)) & (~b.is_valid().to_numpy(zero_copy_only=False))
        new[1:] |= differ & ~both_null
    ranks = np.empty(n, np.int64)
    ranks[order] = np.cumsum(new) - 1
    return ranks


class KeyGroups:
    """The records of one merge in merge order (key, sequence fields, sequence number), cut at keys.

    `ignore_delete` drops retractions before anything else, as Paimon's writer does.
    """

    def __init__(self, table: pa.Table, key_names: Sequence[str], sequence_fields: Sequence[str],
                 sequence_descending: bool, rows_in_sequence_order: bool, ignore_delete: bool):
        if VALUE_KIND in table.column_names:
            kinds = table.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
        else:
            kinds = np.zeros(table.num_rows, dtype=np.int8)
        order = merge_sort_indices(table, key_names, sequence_fields, sequence_descending,
                                   rows_in_sequence_order).astype(np.int64)
        if ignore_delete:
            k = kinds[order]
            order = order[(k == INSERT) | (k == UPDATE_AFTER)]
        self.table = table
        self.order = order
        self.n = len(order)
        if self.n:
            self.ends = np.flatnonzero(key_change_mask(table, key_names, order))
        else:
            self.ends = np.zeros(0, np.int64)
        self.starts = np.r_[0, self.ends[:-1] + 1].astype(np.int64) if self.n else self.ends
        self.count = len(self.ends)
        self.sizes = self.ends - self.starts + 1
        gids = np.repeat(np.arange(self.count, dtype=np.int64), self.sizes)
        self.segments = Segments(gids, self.count)
        self.gids = gids
        self.kinds = kinds[order].astype(np.int8)
        self.is_add = (self.kinds == INSERT) | (self.kinds == UPDATE_AFTER)
        self.is_delete = self.kinds == DELETE
        self._flat: dict[str, pa.Array] = {}
        self._columns: dict[str, pa.Array] = {}

    def _unsorted(self, name: str) -> pa.Array:
        col = self._flat.get(name)
        if col is None:
            raw = self.table.column(name)
            col = raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
            self._flat[name] = col
        return col

    def column(self, name: str) -> pa.Array:
        """Column `name` in merge order."""
        col = self._columns.get(name)
        if col is None:
            col = self._unsorted(name).take(pa.array(self.order, pa.int64()))
            self._columns[name] = col
        return col

    def pick(self, name: str, positions: np.ndarray) -> pa.Array:
        """Column `name` at merge-order `positions` (null at -1), without sorting the column."""
        rows = np.where(positions >= 0, self.order[np.maximum(positions, 0)], -1)
        return pick(self._unsorted(name), rows)

    def valid(self, name: str) -> np.ndarray:
        """Where column `name` (in merge order) is not null."""
        col = self._columns.get(name, self._unsorted(name))
        if col.null_count == 0:
            return np.ones(self.n, dtype=bool)
        valid = col.is_valid().to_numpy(zero_copy_only=False)
        return valid if name in self._columns else valid[self.order]
