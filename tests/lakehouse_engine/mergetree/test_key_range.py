"""Which data files' key ranges meet a range of keys: never a file left out that may hold one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lakehouse_engine.format.binary_row import serialize_row
from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats
from lakehouse_engine.mergetree.key_range import files_meeting_keys, key_span
from lakehouse_engine.types import DataType

BIGINT = [DataType("BIGINT", False)]
DOUBLE = [DataType("DOUBLE", False)]
INT_STRING = [DataType("INT", False), DataType("STRING", False)]
NULLABLE = [DataType("BIGINT", True)]


def file(name: str, lo: Sequence[Any], hi: Sequence[Any], types: list[DataType]) -> DataFileMeta:
    return DataFileMeta(name, 100, 10, serialize_row(list(lo), types), serialize_row(list(hi), types),
                        SimpleStats.EMPTY, SimpleStats.EMPTY, 0, 0, 0, 1)


def names(files: list[DataFileMeta]) -> list[str]:
    return [f.file_name for f in files]


def test_a_file_meets_a_range_it_touches_or_overlaps_and_not_one_beside_it() -> None:
    files = [file("below", [0], [4], BIGINT), file("touches-low", [1], [5], BIGINT),
             file("inside", [6], [7], BIGINT), file("around", [0], [20], BIGINT),
             file("touches-high", [9], [12], BIGINT), file("above", [10], [12], BIGINT)]
    assert names(files_meeting_keys(files, BIGINT, ((5,), (9,)))) == [
        "touches-low", "inside", "around", "touches-high"]


def test_the_span_of_other_files_is_their_lowest_min_to_their_highest_max() -> None:
    others = [file("a", [5], [6], BIGINT), file("b", [8], [9], BIGINT)]
    assert key_span(others, BIGINT) == ((5,), (9,))
    files = [file("gap", [7], [7], BIGINT), file("left", [0], [4], BIGINT)]
    # The span is one range: a file in the gap between the others meets it (it may be read for nothing).
    assert names(files_meeting_keys(files, BIGINT, key_span(others, BIGINT))) == ["gap"]
    assert key_span([], BIGINT) is None


def test_an_unknown_span_meets_every_file() -> None:
    files = [file("a", [0], [1], BIGINT), file("b", [5], [6], BIGINT)]
    assert names(files_meeting_keys(files, BIGINT, None)) == ["a", "b"]
    assert files_meeting_keys([], BIGINT, ((0,), (1,))) == []


def test_floating_keys_meet_every_file() -> None:
    """Python's order is not Paimon's on -0.0 and NaN (and a NaN makes min/max arbitrary)."""
    files = [file("neg-zero", [-0.0], [-0.0], DOUBLE), file("nan", [math.nan], [math.nan], DOUBLE),
             file("far", [100.0], [200.0], DOUBLE)]
    assert names(files_meeting_keys(files, DOUBLE, ((0.0,), (1.0,)))) == ["neg-zero", "nan", "far"]
    assert names(files_meeting_keys(files, DOUBLE, key_span([file("x", [math.nan], [math.nan], DOUBLE)], DOUBLE))) \
        == ["neg-zero", "nan", "far"]
    # A float in any field of a multi-field key, too.
    mixed = [DataType("INT", False), DataType("DOUBLE", False)]
    assert names(files_meeting_keys([file("m", [9, 1.0], [9, 2.0], mixed)], mixed, ((0, 0.0), (1, 0.0)))) == ["m"]


def test_a_first_field_bound_compares_the_first_field_only() -> None:
    files = [file("same-first", [5, "m"], [5, "z"], INT_STRING), file("spans", [4, "z"], [6, "a"], INT_STRING),
             file("other", [7, "a"], [8, "b"], INT_STRING)]
    # (5, "m") > (5,) as tuples: compared whole, the file would wrongly fall outside [5, 5].
    assert names(files_meeting_keys(files, INT_STRING, ((5,), (5,)))) == ["same-first", "spans"]
    # Whole keys compare field after field.
    assert names(files_meeting_keys(files, INT_STRING, ((5, "a"), (5, "c")))) == ["spans"]


def test_keys_that_do_not_compare_meet_every_file() -> None:
    """A null (a first-field bound of a column holding only nulls) orders against nothing."""
    files = [file("a", [0], [1], NULLABLE), file("null", [None], [None], NULLABLE)]
    assert names(files_meeting_keys(files, NULLABLE, ((None,), (None,)))) == ["a", "null"]
    assert names(files_meeting_keys(files[:1], NULLABLE, key_span(files, NULLABLE))) == ["a"]
    # A key that does not decode.
    broken = DataFileMeta("broken", 100, 10, b"\x01", b"\x02", SimpleStats.EMPTY, SimpleStats.EMPTY, 0, 0, 0, 1)
    assert names(files_meeting_keys([broken], BIGINT, ((0,), (1,)))) == ["broken"]
