"""Row kinds and the merge order: records sorted by key, then sequence, and the key boundaries."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.format.float_order import total_order
from lakehouse_engine.schema import SEQUENCE_NUMBER

# Row kinds as `_VALUE_KIND` stores them.
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
ROW_KIND_CODES = {"+I": INSERT, "-U": UPDATE_BEFORE, "+U": UPDATE_AFTER, "-D": DELETE}

# pyarrow 25 moved null placement into each sort key (the global option is deprecated).
_NULL_PLACEMENT_PER_KEY = int(pa.__version__.split(".")[0]) >= 25


def _numeric(arr: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """A NumPy view of a null-free fixed-width column, or None when it must be sorted by Arrow."""
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t)
            or pa.types.is_boolean(t)):
        return None
    if arr.null_count:
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_temporal(t):
        arr = arr.view(pa.int64() if t.bit_width == 64 else pa.int32())
    values = arr.to_numpy(zero_copy_only=False)
    # Java's Double.compare, not IEEE: all NaNs one key, -0.0 and 0.0 two keys.
    return total_order(values) if pa.types.is_floating(t) else values


def in_order_key(table: pa.Table, key_names: Sequence[str], sequence_fields: Sequence[str] = (),
                 rows_in_sequence_order: bool = False) -> np.ndarray | None:
    """The single numeric key as NumPy when a stable sort on it alone is the merge order.

    That holds when rows already stand in sequence order (`rows_in_sequence_order`), the key is
    one null-free numeric column and no sequence field reorders records; else None.
    """
    if rows_in_sequence_order and len(key_names) == 1 and not sequence_fields:
        return _numeric(table.column(key_names[0]))
    return None


def merge_sort_indices(table: pa.Table, key_names: Sequence[str], sequence_fields: Sequence[str] = (),
                       sequence_descending: bool = False, rows_in_sequence_order: bool = False) -> np.ndarray:
    """Row order by (key, sequence fields, `_SEQUENCE_NUMBER`): the order the merge function reads.

    With `rows_in_sequence_order` the caller promises that rows already stand in sequence order
    (sorted runs concatenated oldest first, their sequence ranges disjoint); then a stable sort
    on a single numeric key suffices, and timsort merges the presorted runs in linear time.
    """
    key = in_order_key(table, key_names, sequence_fields, rows_in_sequence_order)
    if key is not None:
        return np.argsort(key, kind="stable")
    columns = [table.column(k) for k in key_names] + [table.column(f) for f in sequence_fields]
    arrays = [_numeric(c) for c in columns]
    if all(a is not None for a in arrays) and not sequence_descending:
        if SEQUENCE_NUMBER not in table.column_names:
            return np.lexsort([np.arange(table.num_rows)] + [a for a in reversed(arrays) if a is not None])
        seq = table.column(SEQUENCE_NUMBER).combine_chunks().to_numpy()
        # np.lexsort sorts by the last key first; its stable passes run fast on presorted runs.
        return np.lexsort([seq] + [a for a in reversed(arrays) if a is not None])
    # FLOAT/DOUBLE keys beside non-numeric ones: sorted by their total-order integers, as Java's
    # Double.compare orders them (Arrow's sort puts NaN with the nulls and ties -0.0 with 0.0).
    for k, a in zip(key_names, arrays, strict=False):
        if a is not None and pa.types.is_floating(table.column(k).type):
            table = table.set_column(table.column_names.index(k), k, pa.array(a))
    sort_keys = [(k, "ascending") for k in key_names]
    order = "descending" if sequence_descending else "ascending"
    sort_keys += [(f, order) for f in sequence_fields]
    if SEQUENCE_NUMBER in table.column_names:
        sort_keys.append((SEQUENCE_NUMBER, "ascending"))
    # Arrow's sort is stable: without the column, rows already in sequence order keep it.
    # Only sequence fields can be null (keys and `_SEQUENCE_NUMBER` never are); Paimon's
    # comparator puts a null first in either sort order, so a null sequence value loses.
    if _NULL_PLACEMENT_PER_KEY:
        nulls_first = [(name, order, "at_start") for name, order in sort_keys]
        return pc.sort_indices(table, sort_keys=nulls_first).to_numpy().astype(np.int64)
    return pc.sort_indices(table, sort_keys=sort_keys, null_placement="at_start").to_numpy().astype(np.int64)


def key_change_mask(table: pa.Table, key_names: Sequence[str], order: np.ndarray) -> np.ndarray:
    """With rows in `order` (sorted by key): True where the next row has another key (last: True)."""
    n = len(order)
    mask = np.zeros(max(n - 1, 0), dtype=bool)
    for k in key_names:
        col = table.column(k)
        arr = _numeric(col)
        if arr is not None:
            s = arr[order]
            mask |= s[1:] != s[:-1]
        else:
            flat = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            s = flat.take(pa.array(order))
            diff = pc.not_equal(s.slice(1), s.slice(0, n - 1))
            mask |= diff.fill_null(True).to_numpy(zero_copy_only=False)
    return np.append(mask, True) if n else mask
