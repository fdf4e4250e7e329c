"""One local[2] SparkSession for the whole pytest session, started on first use; table helpers."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine.table import FileStoreTable

# Two task threads; a task may fail once and be retried (the exactly-once tests rely on it).
MASTER = "local[2,2]"

ORDERS = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("amount", pa.decimal128(12, 2)),
    pa.field("ts", pa.timestamp("us")),
])


SHUFFLE_PARTITIONS = 4


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    from lakehouse_engine.spark.session import create_session

    session = create_session(MASTER, app_name="lakehouse-tests", shuffle_partitions=SHUFFLE_PARTITIONS)
    yield session
    session.stop()


@pytest.fixture
def spark(spark_session: Any) -> Any:
    """The shared session, with this package's shuffle partitions set again: the pipelines' tests
    join the same session with other settings."""
    spark_session.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
    return spark_session


def orders(n: int, start: int = 0, days: int = 3, tag: str = "v1") -> pa.Table:
    """`n` order rows with ids `start..start+n-1` spread over `days` partitions (some nulls)."""
    ids = list(range(start, start + n))
    base = datetime.datetime(2026, 11, 21, 8, 0, 0)
    return pa.table({
        "id": ids,
        "dt": [f"2026-11-{21 + i % days}" for i in ids],
        "name": [None if i % 7 == 0 else f"{tag}-{i}" for i in ids],
        "amount": [None if i % 11 == 0 else decimal.Decimal(i * 3) / 4 for i in ids],
        "ts": [base + datetime.timedelta(seconds=i) for i in ids],
    }, schema=ORDERS)


def key_buckets(table: FileStoreTable, key: str = "id") -> dict[Any, tuple[tuple[Any, ...], int]]:
    """Each key's (partition values, bucket), read split by split from the latest snapshot."""
    rb = table.new_read_builder().with_projection([key])
    read = rb.new_read()
    out = {}
    for split in rb.new_scan().plan().splits():
        for k in read.read_split(split).column(key).to_pylist():
            out[k] = (split.partition_values, split.bucket)
    return out


def live_file_names(table: FileStoreTable) -> set[str]:
    """Names of the data files the latest snapshot references."""
    latest = table.latest_snapshot()
    if latest is None:
        return set()
    return {e.file.file_name for e in table.store.manifest_io().live_entries(latest)}
