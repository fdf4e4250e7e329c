"""The merge's fast paths choose the same rows as its general path.

With one numeric key and rows already in sequence order, `merge_indices` sorts and finds key
boundaries from one NumPy copy of the key; the general path sorts by key and `_SEQUENCE_NUMBER`.
`MergeFunction.merge(columns=...)` gathers only the kept columns, and `take_rows` gathers
columns on threads. Each must give exactly the rows of the plain path.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine.mergetree import merge as merge_module
from lakehouse_engine.mergetree.merge import (
    build_merge_function,
    merge_indices,
    merge_records,
    take_rows,
)
from lakehouse_engine.mergetree.merge_engines.ordering import in_order_key
from lakehouse_engine.options import CoreOptions
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND


def sorted_runs(seed: int, key_type: pa.DataType, retractions: bool) -> pa.Table:
    """Three sorted runs of unique keys, concatenated oldest first (sequence order), with
    overlapping keys, values, kinds and sequence numbers 0.."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(3):
        keys = np.unique(rng.integers(0, 40, 25))
        parts.append(keys)
    keys = np.concatenate(parts)
    n = len(keys)
    if pa.types.is_floating(key_type):
        values = keys.astype(np.float64) / 4 - 3
        values[keys == 7] = np.nan
        values[keys == 12] = -0.0
        key = pa.array(values, key_type)
    else:
        key = pa.array(keys, key_type)
    kinds = rng.choice([0, 1, 2, 3], n) if retractions else np.zeros(n, dtype=np.int8)
    return pa.table({
        "k": key,
        "v": pa.array([f"value-{i}" for i in range(n)]),
        SEQUENCE_NUMBER: pa.array(np.arange(n), pa.int64()),
        VALUE_KIND: pa.array(kinds.astype(np.int8), pa.int8()),
    })


@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
@pytest.mark.parametrize("key_type", [pa.int64(), pa.int32(), pa.float64()])
@pytest.mark.parametrize("retractions", [False, True])
@pytest.mark.parametrize("drop_retracts", [False, True])
def test_in_order_key_path_selects_the_rows_of_the_sequence_sort(
        engine: str, key_type: pa.DataType, retractions: bool, drop_retracts: bool) -> None:
    # (first-row refuses retractions unless `ignore-delete` drops them, as Paimon's)
    ignore_delete = engine == "first-row" and retractions
    for seed in range(5):
        table = sorted_runs(seed, key_type, retractions)
        general = merge_indices(table, ["k"], engine, drop_retracts=drop_retracts, ignore_delete=ignore_delete)
        fast = merge_indices(table.drop_columns([SEQUENCE_NUMBER]), ["k"], engine, drop_retracts=drop_retracts,
                             ignore_delete=ignore_delete, rows_in_sequence_order=True)
        np.testing.assert_array_equal(fast, general)
        # The fast path was taken (one numeric key in sequence order), the general one not.
        assert in_order_key(table, ["k"], rows_in_sequence_order=True) is not None
        assert in_order_key(table, ["k"]) is None


def test_in_order_key_path_with_ignore_delete_drops_retractions_first() -> None:
    table = pa.table({"k": pa.array([1, 2, 1, 2], pa.int64()), "v": ["a", "b", "c", "d"],
                      VALUE_KIND: pa.array([0, 0, 3, 2], pa.int8())})
    idx = merge_indices(table, ["k"], ignore_delete=True, rows_in_sequence_order=True)
    assert table.take(pa.array(idx)).column("v").to_pylist() == ["a", "d"]


@pytest.mark.parametrize("options", [{}, {"merge-engine": "first-row"},
                                     {"merge-engine": "partial-update"}])
def test_merge_with_columns_keeps_the_rows_of_a_full_merge(options: dict[str, str]) -> None:
    table = sorted_runs(3, pa.int64(), retractions=False)
    engine = options.get("merge-engine", "deduplicate")
    full = merge_records(table, ["k"], engine, options=CoreOptions(options))
    function = build_merge_function(CoreOptions({"merge-engine": engine}), ["k"])
    only = function.merge(table, columns=["k", "v"])
    assert only.column_names == ["k", "v"]
    assert only.equals(full.select(["k", "v"]))


def test_threaded_take_gathers_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(merge_module, "_THREADED_TAKE_ROWS", 1)
    table = sorted_runs(4, pa.int64(), retractions=True)
    idx = np.random.default_rng(0).permutation(table.num_rows)[:50]
    threaded = take_rows(table, idx, threads=2)
    assert threaded.equals(table.take(pa.array(idx)))
