"""A data file's keys are checked against the key range its manifest entry records: keys outside
it are damage (files would go unmerged); a recorded range wider than the keys is not (Paimon 0.9's
full-compaction rewrite records the key of a delete it drops, found by the Java changelog sweep)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.binary_row import serialize_row
from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats
from lakehouse_engine.mergetree.data_file_check import check_key_range
from lakehouse_engine.types import DataType

KEY_TYPES = [DataType.parse("INT"), DataType.parse("STRING")]
ROWS = pa.table({"_KEY_p": pa.array([0, 1], pa.int32()), "_KEY_s": ["b", "a"]})  # keys (0, b) .. (1, a)


def _meta(low: list[object], high: list[object]) -> DataFileMeta:
    return DataFileMeta("data-0.parquet", 100, 2, serialize_row(low, KEY_TYPES), serialize_row(high, KEY_TYPES),
                        SimpleStats.EMPTY, SimpleStats.EMPTY, 0, 1, 0, 5)


def _check(low: list[object], high: list[object]) -> None:
    check_key_range("data-0.parquet", ROWS, ["_KEY_p", "_KEY_s"], KEY_TYPES, _meta(low, high))


@pytest.mark.parametrize("low, high", [([0, "b"], [1, "a"]), ([0, "a"], [1, "a"]), ([0, "b"], [1, "zz"]),
                                       ([-5, "q"], [7, ""])])
def test_keys_inside_the_recorded_range_pass(low: list[object], high: list[object]) -> None:
    _check(low, high)


@pytest.mark.parametrize("low, high", [([0, "c"], [1, "a"]), ([0, "b"], [0, "z"]), ([1, "a"], [1, "a"])])
def test_a_key_outside_the_recorded_range_is_damage(low: list[object], high: list[object]) -> None:
    with pytest.raises(CorruptFileError, match="its keys run from"):
        _check(low, high)


def test_a_recorded_key_that_does_not_decode_is_damage() -> None:
    meta = _meta([0, "b"], [1, "a"])
    broken = DataFileMeta(meta.file_name, meta.file_size, meta.row_count, meta.min_key[:6], meta.max_key,
                          meta.key_stats, meta.value_stats, 0, 1, 0, 5)
    with pytest.raises(CorruptFileError):
        check_key_range("data-0.parquet", ROWS, ["_KEY_p", "_KEY_s"], KEY_TYPES, broken)
