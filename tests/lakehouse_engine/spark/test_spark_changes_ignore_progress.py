"""The Structured Streaming source honours the table's `consumer.ignore-progress`, as the Python
stream does: a query with a consumer id starts as its options say, not at the consumer's place,
and records its own position in the consumer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark.changes import register_changes_source
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put

pytestmark = pytest.mark.spark


def _ids_read(spark: Any, tmp_path: Path, name: str, **options: str) -> list[int]:
    register_changes_source(spark)
    reader = spark.readStream.format("lakehouse-changes").option("warehouse", str(tmp_path / "warehouse"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load("db.t").writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    return sorted(r.id for r in spark.sql(f"SELECT id FROM {name}").collect())


def test_a_query_ignores_its_consumers_progress_when_the_table_says_so(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    t = keyed_table(catalog, **{"consumer.ignore-progress": "true"})
    for i in (1, 2, 3):
        put(t, (i, "a", "+I"))
    t.consumer_manager().reset_consumer("etl", 3)  # the consumer has read snapshots 1 and 2
    # Before: the query started at the consumer's snapshot 3 and read id 3 only.
    assert _ids_read(spark, tmp_path, "ignoring", **{"consumer-id": "etl", "start-snapshot": "0"}) == [1, 2, 3]
    consumer = t.consumer_manager().consumer("etl")
    assert consumer is not None and consumer.next_snapshot == 1  # recorded where this query starts

