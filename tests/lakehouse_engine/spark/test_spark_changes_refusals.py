"""The Spark changes source refuses, for a streaming query, the table options the Python stream
refuses: before, a query over a table with `streaming-read-overwrite` = true skipped every
overwrite's changes without a word (and one with `scan.bounded.watermark` never ended)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import StructType

from lakehouse_engine import Catalog
from lakehouse_engine.errors import UnsupportedError
from lakehouse_engine.spark.changes import ChangesDataSource
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


@pytest.mark.parametrize(("key", "value"), [("streaming-read-overwrite", "true"),
                                            ("scan.bounded.watermark", "1700000000000")])
def test_a_streaming_query_over_a_table_with_a_stream_option_it_would_not_apply_is_refused(
        tmp_path: Path, key: str, value: str) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    put(keyed_table(catalog, "t", **{"changelog-producer": "input", key: value}), (1, "a", "+I"))
    source = ChangesDataSource({"path": "db.t", "warehouse": str(tmp_path / "warehouse"), "start-snapshot": "0"})
    schema: StructType = source.schema()
    source.reader(schema)  # a batch range reads no stream option: fine
    with pytest.raises(UnsupportedError, match=f"option '{key}'.*streaming read"):
        source.streamReader(schema)
