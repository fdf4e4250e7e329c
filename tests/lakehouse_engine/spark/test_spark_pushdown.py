"""Spark filters as engine predicates (used where Spark keeps pushdown state per scan), checked
on the reader itself in this process: pruned splits, filtered rows, the rest left to Spark."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    In,
    IsNotNull,
    IsNull,
    LessThanOrEqual,
    Not,
    StringContains,
    StringStartsWith,
)
from pyspark.sql.datasource import (
    Filter as SparkFilter,
)

from lakehouse_engine import Catalog
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from lakehouse_engine.spark.datasource import PushdownDataSource, PushdownReader, to_predicate
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, orders

pytestmark = pytest.mark.spark

PB = PredicateBuilder(["id", "dt", "name", "amount", "price"])
PUSHABLE = frozenset({"id", "dt", "name", "amount"})


@pytest.mark.parametrize(("spark_filter", "expected"), [
    (EqualTo(("dt",), "a"), PB.equal("dt", "a")),
    (Not(EqualTo(("dt",), "a")), PB.not_equal("dt", "a")),
    (GreaterThan(("id",), 3), PB.greater_than("id", 3)),
    (LessThanOrEqual(("id",), 3), PB.less_or_equal("id", 3)),
    (In(("id",), (1, None, 2)), PB.is_in("id", [1, 2])),
    (Not(In(("id",), (1, 2))), PB.is_not_in("id", [1, 2])),
    (IsNull(("name",)), PB.is_null("name")),
    (Not(IsNull(("name",))), PB.is_not_null("name")),
    (IsNotNull(("name",)), PB.is_not_null("name")),
    (EqualNullSafe(("name",), None), PB.is_null("name")),
    (StringStartsWith(("name",), "v1"), PB.startswith("name", "v1")),
])
def test_spark_filters_become_engine_predicates(spark_filter: SparkFilter, expected: Predicate) -> None:
    assert to_predicate(spark_filter, PB, PUSHABLE) == expected


@pytest.mark.parametrize("spark_filter", [
    EqualTo(("price",), 1.5),                 # a float column: NaN compares differently
    EqualTo(("s", "x"), 1),                   # a nested field
    Not(In(("id",), (1, None))),              # NOT IN with a null is never true
    Not(GreaterThan(("id",), 3)),
    StringContains(("name",), "x"),
    EqualTo(("id",), None),
])
def test_other_filters_stay_with_spark(spark_filter: SparkFilter) -> None:
    assert to_predicate(spark_filter, PB, PUSHABLE) is None


def test_pushed_filters_prune_splits_and_rows(catalog: Catalog) -> None:
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 3})
    engine_write(table, orders(90))
    source = PushdownDataSource({"path": "db.orders", "warehouse": catalog.warehouse})
    reader: Any = source.reader(source.schema())
    assert isinstance(reader, PushdownReader)
    kept = [EqualTo(("dt",), "2026-11-22"), GreaterThan(("id",), 40)]
    rest = [StringContains(("name",), "1")]

    assert reader.pushFilters(kept + rest) == rest
    partitions = reader.partitions()
    got = [r for p in partitions for b in reader.read(p) for r in b.to_pylist()]

    pb = table.new_read_builder().new_predicate_builder()
    where = pb.and_predicates([pb.equal("dt", "2026-11-22"), pb.greater_than("id", 40)])
    assert len(partitions) == 3  # one partition's buckets
    assert sorted(got, key=lambda r: r["id"]) == rows(read(table, predicate=where), "id")
