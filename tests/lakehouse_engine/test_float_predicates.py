"""Filters on FLOAT and DOUBLE fields compare as Java's Double.compare / Float.compare, as Paimon
does and as float keys are ordered (`format/float_order.py`): `= NaN` matches NaN rows, NaN is
above +Infinity, -0.0 and 0.0 are two values; in row filtering and in file pruning by statistics."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from tests.lakehouse_engine.conftest import create_table, read, write

NAN, INF = math.nan, math.inf
VALUES = [1.5, NAN, -0.0, 0.0, None, INF, -INF]
NAMES = ["one and a half", "nan", "negative zero", "zero", "null", "infinity", "minus infinity"]
PB = PredicateBuilder(["x", "name"], {"x": pa.float64(), "name": pa.string()})

CASES: list[tuple[str, Predicate, set[str]]] = [
    ("= NaN", PB.equal("x", NAN), {"nan"}),
    ("= 0.0", PB.equal("x", 0.0), {"zero"}),
    ("= -0.0", PB.equal("x", -0.0), {"negative zero"}),
    ("!= NaN", PB.not_equal("x", NAN), {"one and a half", "negative zero", "zero", "infinity",
                                        "minus infinity"}),
    ("> 5", PB.greater_than("x", 5.0), {"nan", "infinity"}),
    ("> inf", PB.greater_than("x", INF), {"nan"}),
    ("< NaN", PB.less_than("x", NAN), {"one and a half", "negative zero", "zero", "infinity",
                                       "minus infinity"}),
    ("< 0.0", PB.less_than("x", 0.0), {"negative zero", "minus infinity"}),
    (">= 0.0", PB.greater_or_equal("x", 0.0), {"zero", "one and a half", "infinity", "nan"}),
    ("<= -0.0", PB.less_or_equal("x", -0.0), {"negative zero", "minus infinity"}),
    ("in (NaN, -0.0)", PB.is_in("x", [NAN, -0.0]), {"nan", "negative zero"}),
    ("not in (NaN)", PB.is_not_in("x", [NAN]), {"one and a half", "negative zero", "zero",
                                                "infinity", "minus infinity"}),
    ("between -0.0 and 0.0", PB.between("x", -0.0, 0.0), {"negative zero", "zero"}),
    ("is null", PB.is_null("x"), {"null"}),
    ("= NaN or = 1.5", PB.or_predicates([PB.equal("x", NAN), PB.equal("x", 1.5)]),
     {"nan", "one and a half"}),
]


@pytest.mark.parametrize(("label", "predicate", "expected"), CASES, ids=[c[0] for c in CASES])
def test_row_filters_on_doubles_follow_javas_double_compare(label: str, predicate: Predicate,
                                                            expected: set[str]) -> None:
    rows = pa.table({"x": pa.array(VALUES, pa.float64()), "name": NAMES})
    assert set(predicate.filter_table(rows).column("name").to_pylist()) == expected


def test_row_filters_on_floats_compare_the_literal_as_a_float() -> None:
    pb = PredicateBuilder(["x"], {"x": pa.float32()})
    rows = pa.table({"x": pa.array([0.1, NAN, -0.0], pa.float32())})
    assert pb.equal("x", 0.1).filter_table(rows).num_rows == 1  # 0.1 as a FLOAT, as in Java
    assert pb.equal("x", NAN).filter_table(rows).num_rows == 1
    assert pb.equal("x", 0.0).filter_table(rows).num_rows == 0


@pytest.mark.parametrize(("label", "predicate", "expected"), CASES, ids=[c[0] for c in CASES])
def test_stats_pruning_on_double_keys_keeps_every_file_with_a_matching_row(
        catalog: Catalog, label: str, predicate: Predicate, expected: set[str]) -> None:
    # One file per value, so pruning by each file's key stats decides every row on its own.
    if label == "is null":
        pytest.skip("keys are never null")
    schema = pa.schema([pa.field("x", pa.float64(), nullable=False), ("name", pa.string())])
    t = create_table(catalog, "t", schema, primary_keys=["x"],
                     options={"bucket": "1", "write-only": "true"})
    for value, name in zip(VALUES, NAMES, strict=True):
        if value is not None:
            write(t, pa.table({"x": [value], "name": [name]}, schema=schema))
    got = read(t, predicate=predicate).column("name").to_pylist()
    assert sorted(got) == sorted(expected)


def test_stats_written_with_ieee_min_max_do_not_prune_nan_or_negative_zero() -> None:
    # pypaimon takes statistics with pyarrow's min/max: NaN left out, 0.0 for a file whose
    # values are -0.0 and 0.0. Such bounds must not prune a file holding NaN or -0.0.
    assert PB.greater_than("x", 5.0).may_match({"x": (1.0, 2.0)})  # the file may hold NaN
    assert PB.equal("x", NAN).may_match({"x": (1.0, 2.0)})
    assert PB.equal("x", -0.0).may_match({"x": (0.0, 3.0)})
    assert not PB.equal("x", -1.0).may_match({"x": (0.0, 3.0)})
    assert not PB.less_than("x", 1.0).may_match({"x": (1.0, 2.0)})
    assert not PB.greater_than("x", NAN).may_match({"x": (1.0, 2.0)})  # nothing is above NaN
