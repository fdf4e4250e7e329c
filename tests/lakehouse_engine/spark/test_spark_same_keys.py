"""A Spark write racing an engine write of the same keys: the later commit wins, also after full compaction."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.spark import write as spark_write
from lakehouse_engine.write.commit_message import CommitMessage
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.conftest import write as engine_write

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
KEYS = list(range(40))


def _rows(keys: list[int], value: str) -> pa.Table:
    return pa.table({"id": keys, "v": [value] * len(keys)}, schema=SCHEMA)


def _state(table: Any) -> dict[int, str]:
    t = read(table)
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


def _table(catalog: Catalog, name: str) -> Any:
    table = create_table(catalog, name, SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    engine_write(table, _rows(KEYS, "v0"))
    return table


def test_a_spark_write_committed_after_an_engine_write_of_the_same_keys_wins(
        spark: Any, catalog: Catalog, tmp_path: Path) -> None:
    table = _table(catalog, "spark_last")
    warehouse, marker = catalog.warehouse, str(tmp_path / "engine-committed")

    def engine_commits_meanwhile(messages: list[CommitMessage]) -> None:
        # In the first task, after Spark's files are written and before the driver commits them:
        # an engine writer of the same keys (in reverse order, so the numbers cross) commits first.
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        engine_write(Catalog(warehouse).get_table("db.spark_last"), _rows(KEYS[::-1], "engine"))

    spark_write(spark.createDataFrame(_rows(KEYS, "spark").to_pandas()), table,
                _task_hook=engine_commits_meanwhile)
    assert [s.commit_kind for s in table.snapshots()][:3] == ["APPEND", "APPEND", "APPEND"]
    assert _state(table) == {k: "spark" for k in KEYS}
    table.compact(full=True)
    assert _state(table) == {k: "spark" for k in KEYS}


def test_an_engine_write_committed_after_a_spark_write_of_the_same_keys_wins(
        spark: Any, catalog: Catalog) -> None:
    table = _table(catalog, "engine_last")
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(KEYS[::-1], "engine"))  # numbered from the snapshot before the Spark write
    messages = w.prepare_commit()
    spark_write(spark.createDataFrame(_rows(KEYS, "spark").to_pandas()), table)
    c.commit(messages)
    assert _state(table) == {k: "engine" for k in KEYS}
    table.compact(full=True)
    assert _state(table) == {k: "engine" for k in KEYS}
