"""pypaimon 2.1.0 reads the tables Spark writes (fixed-bucket and append) as the engine does."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark import write as spark_write
from tests.interop.conftest import run_pypaimon
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.spark.conftest import ORDERS, orders

pytestmark = [pytest.mark.spark, pytest.mark.interop]

READ_ALL = """
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
out = {}
for name in ARGS["tables"]:
    rb = catalog.get_table(name).new_read_builder()
    result = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    out[name] = sorted(result.to_pylist(), key=lambda r: r["id"])
emit(out)
"""


def _as_json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: None if v is None else str(v) for k, v in r.items()} for r in rows]


def test_pypaimon_reads_what_spark_writes(spark: Any, catalog: Catalog) -> None:
    pk = create_table(catalog, "pk", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                      options={"bucket": 3})
    log = create_table(catalog, "log", ORDERS, partition_keys=["dt"])
    spark_write(spark.createDataFrame(orders(100)), pk)
    spark_write(spark.createDataFrame(orders(50, start=80, tag="v2")), pk)
    spark_write(spark.createDataFrame(orders(40)).repartition(2), log)

    got = run_pypaimon(READ_ALL, warehouse=catalog.warehouse, tables=["db.pk", "db.log"])

    for name, table in (("db.pk", pk), ("db.log", log)):
        ours = sorted(read(table).to_pylist(), key=lambda r: r["id"])
        assert len(ours) == (130 if name == "db.pk" else 40)
        assert [{k: None if v is None else str(v) for k, v in r.items()} for r in got[name]] == \
            _as_json(ours), name
