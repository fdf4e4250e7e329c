"""Spark writes and compacts a first-row table as the engine does: each task's commit takes its
bucket's level 0 up without the keys already above (Paimon reads those files raw), and a Spark
compaction of a write-only table does the same."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark import compact as spark_compact
from lakehouse_engine.spark import write as spark_write
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.spark.conftest import ORDERS, orders
from tests.lakehouse_engine.write.test_first_row_level0_up import (
    assert_one_file_per_key_above_level0,
    level0_files,
)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("options", [{"bucket": "3"}, {"bucket": "-1", "dynamic-bucket.target-row-num": "20"},
                                     {"bucket": "3", "write-only": "true"}], ids=["fixed", "dynamic", "write_only"])
def test_spark_keeps_each_key_of_a_first_row_table_in_one_file_above_level0(
        spark: Any, catalog: Catalog, options: dict[str, str]) -> None:
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"merge-engine": "first-row", **options})
    first = orders(100)
    spark_write(spark.createDataFrame(first), table)
    spark_write(spark.createDataFrame(orders(60, start=50, tag="v2")), table)
    if options.get("write-only") == "true":
        assert level0_files(table)
        spark_compact(spark, table)
    assert level0_files(table) == []
    assert_one_file_per_key_above_level0(table)
    later = orders(60, start=50, tag="v2").to_pylist()
    expected = first.to_pylist() + [r for r in later if r["id"] >= 100]
    assert rows(read(table), "id", "dt") == sorted(expected, key=lambda r: (r["id"], r["dt"]))
