"""Paimon's LookupMergeFunction (`mergetree.lookup_merge`): a table that needs lookups merges per key
its level-0 records and only the latest record above level 0, on every path that merges files."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.lookup_merge import (
    latest_above_level0_mask,
    needs_lookup_merge,
    row_levels,
)
from lakehouse_engine.mergetree.merge import build_merge_function
from lakehouse_engine.mergetree.merge_order import merge_order, sequence_disjoint
from lakehouse_engine.mergetree.range_merge import range_merge
from lakehouse_engine.options import CoreOptions
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from tests.lakehouse_engine.mergetree.test_range_merge import (
    ENGINES,
    INT_KEY,
    _batches,
    _files,
    _meta,
)

AGGREGATION = {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
               "fields.s.aggregate-function": "max", "changelog-producer": "lookup"}


def _records(rows: list[tuple[int, int | None, int, int]]) -> pa.Table:
    """(k, n, s, sequence number) records, in merge order."""
    return pa.table({"k": [r[0] for r in rows], "n": pa.array([r[1] for r in rows], pa.int64()),
                     "s": [r[2] for r in rows], SEQUENCE_NUMBER: pa.array([r[3] for r in rows], pa.int64()),
                     VALUE_KIND: pa.array([0] * len(rows), pa.int8())})


def test_a_key_in_two_levels_above_0_counts_its_latest_record_only() -> None:
    # Level 5: the old value; level 4: the merged value Java's lookup compaction wrote; level 0 new.
    rows = _records([(1, 1, 0, 0), (2, 1, 0, 1), (1, 2, 0, 50), (1, 5, 0, 60)])
    levels = np.array([5, 5, 4, 0])
    lookup = build_merge_function(CoreOptions(AGGREGATION), ["k"], ["k"])
    plain = build_merge_function(CoreOptions({**AGGREGATION, "changelog-producer": "none"}), ["k"], ["k"])
    assert lookup.lookup and not plain.lookup
    merged = lookup.merge(lookup.lookup_candidates(rows, levels))
    assert merged.select(["k", "n"]).to_pylist() == [{"k": 1, "n": 7}, {"k": 2, "n": 1}]
    # Without the rule (before): the old value counted again.
    assert plain.merge(plain.lookup_candidates(rows, levels)).column("n").to_pylist() == [8, 1]


def latest_above_level0(table: pa.Table, levels: np.ndarray, key_names: list[str], **kwargs: Any) -> pa.Table:
    keep = latest_above_level0_mask(table, levels, key_names, **kwargs)
    return table if keep is None else table.filter(pa.array(keep))


def test_equal_sequence_numbers_above_level_0_take_the_lower_level() -> None:
    # Java's lookup compaction gives a retraction's merged row the sequence number of the row it
    # looked up: two records of a key with one number, the lower level's written later.
    rows = _records([(1, 1, 0, 50), (1, 2, 0, 50)])
    assert latest_above_level0(rows, np.array([3, 4]), ["k"]).column("n").to_pylist() == [1]
    assert latest_above_level0(rows, np.array([4, 3]), ["k"]).column("n").to_pylist() == [2]


def test_sequence_field_decides_the_latest_record_above_level_0() -> None:
    rows = _records([(1, 1, 9, 0), (1, 2, 3, 50), (1, 7, 1, 60)])
    kept = latest_above_level0(rows, np.array([5, 4, 0]), ["k"], sequence_fields=["s"])
    assert kept.column("n").to_pylist() == [1, 7]  # level 5's s=9 is the latest above level 0
    kept = latest_above_level0(rows, np.array([5, 4, 0]), ["k"], sequence_fields=["s"], sequence_descending=True)
    assert kept.column("n").to_pylist() == [2, 7]


def test_records_in_sequence_order_without_sequence_numbers() -> None:
    rows = _records([(1, 1, 0, 0), (2, 1, 0, 1), (1, 2, 0, 5), (2, 3, 0, 6)]).drop_columns([SEQUENCE_NUMBER])
    kept = latest_above_level0(rows, np.array([5, 5, 4, 4]), ["k"], rows_in_sequence_order=True)
    assert kept.select(["k", "n"]).to_pylist() == [{"k": 1, "n": 2}, {"k": 2, "n": 3}]


@pytest.mark.parametrize(("options", "expected"), [
    ({"changelog-producer": "lookup", "merge-engine": "aggregation"}, True),
    ({"changelog-producer": "lookup", "merge-engine": "partial-update"}, True),
    ({"force-lookup": "true", "merge-engine": "partial-update"}, True),
    ({"changelog-producer": "lookup"}, False),  # deduplicate: the latest wins anyway
    ({"changelog-producer": "lookup", "merge-engine": "first-row"}, False),
    ({"changelog-producer": "input", "merge-engine": "aggregation"}, False),
    ({"changelog-producer": "lookup", "merge-engine": "aggregation", "deletion-vectors.enabled": "true"}, False),
])
def test_which_tables_merge_with_the_rule(options: dict[str, str], expected: bool) -> None:
    assert needs_lookup_merge(CoreOptions(options)) is expected


@settings(max_examples=120, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_range_by_range_lookup_merge_equals_the_whole_section_merge(engine: str, data: st.DataObject) -> None:
    runs = data.draw(_files("int", engine))
    names, types = INT_KEY
    options = CoreOptions({"merge-engine": engine, "force-lookup": "true", **ENGINES[engine]})
    function = build_merge_function(options, names, names)
    files: dict[str, tuple[DataFileMeta, pa.Table, list[int]]] = {}
    # Level 0 or a level of its own (files of one level above 0 never share a key).
    upper = data.draw(st.permutations(range(1, 6)))
    for i, (t, cuts) in enumerate(runs):
        if t.num_rows:
            level = upper[i] if data.draw(st.booleans()) else 0
            files[f"f{i}"] = (dataclasses.replace(_meta(f"f{i}", t, names, types), level=level), t, cuts)
    metas = [m for m, _, _ in files.values()]

    def merge(rows: pa.Table, in_order: bool) -> pa.Table:
        return function.merge(rows, rows_in_sequence_order=in_order)

    def read(f: DataFileMeta, _bytes: int) -> Iterator[pa.Table]:
        _, table, cuts = files[f.file_name]
        return _batches(table, cuts)

    def key_of(binary: bytes) -> tuple[Any, ...]:
        return comparable_key(deserialize_row(binary, types))

    ranged = list(range_merge(metas, read, names, merge, 1, key_of, candidates=function.lookup_candidates))
    ordered = merge_order(metas)
    if not ordered:
        return
    tables = [files[f.file_name][1] for f in ordered]
    in_order = sequence_disjoint(ordered)
    whole_rows = function.lookup_candidates(
        pa.concat_tables(tables), row_levels([t.num_rows for t in tables], [f.level for f in ordered]), in_order)
    whole = merge(whole_rows, in_order)
    got = pa.concat_tables(ranged) if ranged else whole.slice(0, 0)
    assert got.to_pylist() == whole.to_pylist()
