"""The Spark write and compaction of a deletion-vector table maintain its vectors: after each
commit no level-0 file is left (a DV table's readers skip level 0), the replaced and deleted rows
are marked, and the table reads (engine, Spark's native read) as the same writes into a table
merged on read."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.format.deletion_vectors import DELETION_VECTORS_INDEX
from lakehouse_engine.spark import compact as spark_compact
from lakehouse_engine.spark import read as spark_read
from lakehouse_engine.spark import write as spark_write
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                    pa.field("kind", pa.string())])


def _df(spark: Any, ids: range | list[int], tag: str, kind: str = "+I") -> Any:
    return spark.createDataFrame([(i, f"{tag}{i}", kind) for i in ids], "id bigint, v string, kind string")


def _level_zero(table: FileStoreTable) -> list[str]:
    return [e.file.file_name for e in table.store.manifest_io().live_entries(table.latest_snapshot())
            if e.file.level == 0]


def _marked(table: FileStoreTable) -> int:
    return sum(e.row_count for e in table.store.manifest_io().index_entries(table.latest_snapshot())
               if e.index_type == DELETION_VECTORS_INDEX)


def _state(table: FileStoreTable) -> list[dict[str, Any]]:
    return rows(read(table).select(["id", "v"]), "id")


def test_spark_writes_and_compaction_keep_a_dv_tables_vectors(spark: Any, catalog: Catalog) -> None:
    options = {"bucket": "2", "rowkind.field": "kind"}
    dv = create_table(catalog, "dv", SCHEMA, ["id"], options={**options, "deletion-vectors.enabled": "true"})
    merged = create_table(catalog, "merged", SCHEMA, ["id"], options=options)
    steps = [(range(0, 200), "a", "+I"), (range(50, 120), "b", "+I"), (list(range(0, 200, 9)), "x", "-D"),
             (range(150, 260), "c", "+I")]
    for ids, tag, kind in steps:
        for t in (dv, merged):
            spark_write(_df(spark, ids, tag, kind), t)
        assert _level_zero(dv) == [], f"level 0 left after the Spark write of {tag}"
        assert _state(dv) == _state(merged), tag
    assert _marked(dv) > 0, "the upserts and deletes marked rows of older files"
    native = spark_read(spark, dv).select("id", "v").collect()
    assert sorted((r["id"], r["v"]) for r in native) == [(r["id"], r["v"]) for r in _state(merged)]
    spark_compact(spark, dv, full=True)
    assert _level_zero(dv) == [] and _marked(dv) == 0, "a full compaction applies and drops the vectors"
    assert _state(dv) == _state(merged)
