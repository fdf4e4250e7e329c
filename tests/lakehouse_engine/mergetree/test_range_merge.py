"""range_merge: merging a bucket's sorted runs key range by key range gives exactly the merge of the
whole section, for every merge engine, key type and way the files happen to be cut into batches."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_engine.format.binary_row import deserialize_row, serialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats
from lakehouse_engine.mergetree.merge import build_merge_function, merge_sort_indices
from lakehouse_engine.mergetree.merge_order import merge_order, sequence_disjoint
from lakehouse_engine.mergetree.range_merge import batch_budgets, range_merge
from lakehouse_engine.options import CoreOptions
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.types import DataType

# Two key shapes: one BIGINT; and (STRING, DOUBLE) with NaN, -0.0 and 0.0 (Java's order).
INT_KEY = (["k"], [DataType.parse("BIGINT NOT NULL")])
PAIR_KEY = (["s", "d"], [DataType.parse("STRING NOT NULL"), DataType.parse("DOUBLE NOT NULL")])
ENGINES = {
    "deduplicate": {},
    "first-row": {"ignore-delete": "true"},  # (first-row refuses retractions without it, as Paimon)
    "partial-update": {},
    "aggregation": {"fields.v.aggregate-function": "sum", "fields.w.aggregate-function": "max"},
}


def _key_values(shape: str, n: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    if shape == "int":
        return st.lists(st.integers(0, 40).map(lambda i: (i,)), max_size=n, unique=True)
    doubles = st.sampled_from([-1.5, -0.0, 0.0, 2.0, math.inf, math.nan])
    return st.lists(st.tuples(st.sampled_from(["", "a", "b", "é"]), doubles), max_size=n,
                    unique_by=lambda t: (t[0], comparable_key([t[1]])))


@st.composite
def _files(draw: st.DrawFn, shape: str, engine: str) -> list[tuple[pa.Table, list[int]]]:
    """Up to five sorted runs of unique keys, each with the batch sizes it is read in."""
    names, _ = INT_KEY if shape == "int" else PAIR_KEY
    disjoint = draw(st.booleans())
    runs = []
    for i in range(draw(st.integers(1, 5))):
        keys = draw(_key_values(shape, 25))
        n = len(keys)
        if disjoint:  # sequence ranges of the files do not overlap: merged without `_SEQUENCE_NUMBER`
            seq = [i * 1000 + draw(st.integers(0, 999)) for _ in range(n)]
        else:  # they overlap and tie across files: file order decides
            seq = [draw(st.integers(0, 8)) for _ in range(n)]
        kinds = ([draw(st.sampled_from([0, 0, 1, 2, 3])) for _ in range(n)]
                 if engine in ("deduplicate", "first-row") else [0] * n)
        columns: dict[str, Any] = {name: [k[j] for k in keys] for j, name in enumerate(names)}
        columns["v"] = pa.array([draw(st.one_of(st.none(), st.integers(-5, 5))) for _ in range(n)], pa.int64())
        columns["w"] = pa.array([draw(st.one_of(st.none(), st.integers(-5, 5))) for _ in range(n)], pa.int64())
        columns[SEQUENCE_NUMBER] = pa.array(seq, pa.int64())
        columns[VALUE_KIND] = pa.array(kinds, pa.int8())
        table = pa.table(columns)
        table = table.take(pa.array(merge_sort_indices(table, names)))  # a sorted run
        cuts = sorted(draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=4, unique=True)))
        runs.append((table, cuts))
    return runs


def _meta(name: str, table: pa.Table, names: list[str], types: list[DataType]) -> DataFileMeta:
    first = [table.column(k)[0].as_py() for k in names]
    last = [table.column(k)[-1].as_py() for k in names]
    seq = table.column(SEQUENCE_NUMBER).to_pylist()
    return DataFileMeta(name, 1, table.num_rows, serialize_row(first, types), serialize_row(last, types),
                        SimpleStats.EMPTY, SimpleStats.EMPTY, min(seq), max(seq), 0, 0)


def _batches(table: pa.Table, cuts: list[int]) -> Iterator[pa.Table]:
    bounds = [0, *[c for c in cuts if c < table.num_rows], table.num_rows]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        yield table.slice(lo, hi - lo)


def _merges(shape: str, engine: str, runs: list[tuple[pa.Table, list[int]]],
            drop_retracts: bool, columns: list[str] | None = None) -> tuple[pa.Table, pa.Table]:
    """(range by range, whole section) merges of the same files."""
    names, types = INT_KEY if shape == "int" else PAIR_KEY
    options = CoreOptions({"merge-engine": engine, **ENGINES[engine]})
    function = build_merge_function(options, names, names)
    files = {f"f{i}": (_meta(f"f{i}", t, names, types), t, cuts)
             for i, (t, cuts) in enumerate(runs) if t.num_rows}
    metas = [m for m, _, _ in files.values()]

    def merge(rows: pa.Table, in_order: bool) -> pa.Table:
        return function.merge(rows, drop_retracts=drop_retracts, rows_in_sequence_order=in_order,
                              columns=columns)

    def read(f: DataFileMeta, _bytes: int) -> Iterator[pa.Table]:
        _, table, cuts = files[f.file_name]
        return _batches(table, cuts)

    def key_of(binary: bytes) -> tuple[Any, ...]:
        return comparable_key(deserialize_row(binary, types))

    ranged = list(range_merge(metas, read, names, merge, 1, key_of))
    ordered = merge_order(metas)
    if not ordered:
        return pa.table({}), pa.table({})
    whole = merge(pa.concat_tables([files[f.file_name][1] for f in ordered]), sequence_disjoint(ordered))
    got = pa.concat_tables(ranged) if ranged else whole.slice(0, 0)
    return got, whole


@settings(max_examples=150, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("shape", ["int", "pair"])
def test_range_by_range_merge_equals_the_whole_section_merge(shape: str, engine: str, data: st.DataObject) -> None:
    runs = data.draw(_files(shape, engine))
    drop = data.draw(st.booleans())
    got, whole = _merges(shape, engine, runs, drop)
    # repr: NaN and -0.0 compare as themselves.
    assert repr(got.to_pylist()) == repr(whole.to_pylist())


def test_ranges_come_in_key_order_and_each_key_in_one_range() -> None:
    runs = [(pa.table({"k": list(range(0, 300, 3)), "v": [1] * 100, "w": [1] * 100,
                       SEQUENCE_NUMBER: pa.array(range(100), pa.int64()),
                       VALUE_KIND: pa.array([0] * 100, pa.int8())}), [10, 20, 30, 60]),
            (pa.table({"k": list(range(0, 300, 2)), "v": [2] * 150, "w": [2] * 150,
                       SEQUENCE_NUMBER: pa.array(range(200, 350), pa.int64()),
                       VALUE_KIND: pa.array([0] * 150, pa.int8())}), [7, 50, 51, 100])]
    names, types = INT_KEY
    function = build_merge_function(CoreOptions({}), names, names)
    metas = [_meta(f"f{i}", t, names, types) for i, (t, _) in enumerate(runs)]
    tables = {m.file_name: r for m, r in zip(metas, runs, strict=True)}
    ranges = list(range_merge(
        metas, lambda f, _b: _batches(*tables[f.file_name]), names,
        lambda rows, in_order: function.merge(rows, rows_in_sequence_order=in_order), 1,
        lambda b: comparable_key(deserialize_row(b, types))))
    assert len(ranges) > 3
    keys = [r.column("k").to_pylist() for r in ranges]
    flat = [k for part in keys for k in part]
    assert flat == sorted(set(range(0, 300, 3)) | set(range(0, 300, 2)))
    # the later file wins every key both hold
    merged = pa.concat_tables(ranges)
    assert set(merged.filter(pa.compute.equal(merged.column("k"), 6)).column("v").to_pylist()) == {2}


def test_files_without_key_columns_merge_on_the_value_fields() -> None:
    # Thin-mode files (Paimon's `data-file.thin-mode`) have no `_KEY_` columns: the merge reads
    # only the key fields among the values, so it needs none.
    table = pa.table({"k": [1, 2, 3], "v": [1, 1, 1], "w": [0, 0, 0],
                      SEQUENCE_NUMBER: pa.array([0, 1, 2], pa.int64()), VALUE_KIND: pa.array([0, 0, 0], pa.int8())})
    newer = pa.table({"k": [2, 4], "v": [9, 9], "w": [0, 0],
                      SEQUENCE_NUMBER: pa.array([5, 6], pa.int64()), VALUE_KIND: pa.array([0, 0], pa.int8())})
    assert not any(c.startswith("_KEY_") for c in table.column_names)
    got, whole = _merges("int", "deduplicate", [(table, [1]), (newer, [1])], True)
    assert got.equals(whole)
    assert got.column("v").to_pylist() == [1, 9, 1, 9]


def test_a_section_read_whole_merges_in_one_round() -> None:
    # Each file comes back whole in one batch: its row count says it is done, so the merge does
    # not wait for a second round to learn that (one merge, one range).
    old = pa.table({"k": [1, 2, 3], "v": [1, 1, 1], "w": [0, 0, 0],
                    SEQUENCE_NUMBER: pa.array([0, 1, 2], pa.int64()), VALUE_KIND: pa.array([0, 0, 0], pa.int8())})
    new = pa.table({"k": [2, 3], "v": [9, 9], "w": [0, 0],
                    SEQUENCE_NUMBER: pa.array([5, 6], pa.int64()), VALUE_KIND: pa.array([0, 0], pa.int8())})
    names, types = INT_KEY
    function = build_merge_function(CoreOptions({}), names, names)
    metas = [_meta(f"f{i}", t, names, types) for i, t in enumerate([old, new])]
    tables = {m.file_name: t for m, t in zip(metas, [old, new], strict=True)}
    calls = []

    def merge(rows: pa.Table, in_order: bool) -> pa.Table:
        calls.append(rows.num_rows)
        return function.merge(rows, rows_in_sequence_order=in_order)

    ranges = list(range_merge(metas, lambda f, _b: iter([tables[f.file_name]]), names, merge,
                              1 << 20, lambda b: comparable_key(deserialize_row(b, types))))
    assert calls == [5]
    assert [r.column("v").to_pylist() for r in ranges] == [[1, 9, 9]]


def test_files_share_the_batch_budget_by_size() -> None:
    names, types = INT_KEY
    table = pa.table({"k": [1], SEQUENCE_NUMBER: pa.array([0], pa.int64())})
    big = dataclasses.replace(_meta("big", table, names, types), file_size=900)
    small = dataclasses.replace(_meta("small", table, names, types), file_size=100)
    tiny = dataclasses.replace(_meta("tiny", table, names, types), file_size=1)
    assert batch_budgets([big, small], 2000) == [900, 125]
    # A small file still reads a quarter of an equal share at a time.
    assert batch_budgets([big, tiny], 2000) == [998, 125]
    assert batch_budgets([big, big], 2000) == [500, 500]


def test_a_merge_on_the_callers_thread_equals_one_reading_ahead() -> None:
    # threads=1 (a read merging several splits at once) reads each batch when needed, no pool.
    runs = [(pa.table({"k": list(range(0, 90, 3)), "v": [1] * 30, "w": [1] * 30,
                       SEQUENCE_NUMBER: pa.array(range(30), pa.int64()),
                       VALUE_KIND: pa.array([0] * 30, pa.int8())}), [5, 11, 20]),
            (pa.table({"k": list(range(0, 90, 2)), "v": [2] * 45, "w": [2] * 45,
                       SEQUENCE_NUMBER: pa.array(range(100, 145), pa.int64()),
                       VALUE_KIND: pa.array([0] * 45, pa.int8())}), [7, 8, 30])]
    names, types = INT_KEY
    function = build_merge_function(CoreOptions({}), names, names)
    metas = [_meta(f"f{i}", t, names, types) for i, (t, _) in enumerate(runs)]
    tables = {m.file_name: r for m, r in zip(metas, runs, strict=True)}

    def ranges(threads: int | None) -> list[list[int]]:
        return [r.column("k").to_pylist() for r in range_merge(
            metas, lambda f, _b: _batches(*tables[f.file_name]), names,
            lambda rows, in_order: function.merge(rows, rows_in_sequence_order=in_order), 1,
            lambda b: comparable_key(deserialize_row(b, types)), threads)]

    assert ranges(1) == ranges(None)
    assert [k for r in ranges(1) for k in r] == sorted(set(range(0, 90, 3)) | set(range(0, 90, 2)))
