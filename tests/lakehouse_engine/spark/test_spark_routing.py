"""Routing a Spark write: Paimon's hash as Spark expressions (bit for bit), the packed shuffle
(every (partition, bucket) in exactly one task, buckets spread evenly, order kept), and
`bucket_column` against the engine's own bucket assignment."""

from __future__ import annotations

import datetime
import decimal
import random
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.spark import routing
from lakehouse_engine.spark import write as spark_write
from lakehouse_engine.spark.bucket_expr import key_hash_expression
from lakehouse_engine.spark.routing import (
    ASSIGNER_COLUMN,
    ROUTE_COLUMN,
    bucket_column,
    route_rows,
    unpack_routed,
    write_task_count,
)
from lakehouse_engine.spark.tables import TableRef, rechunk
from lakehouse_engine.types import DataType
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, key_buckets, live_file_names, orders

pytestmark = pytest.mark.spark

KEY_TYPES = {"b": "BOOLEAN", "i8": "TINYINT", "i16": "SMALLINT", "i32": "INT", "i64": "BIGINT",
             "d": "DATE", "s": "STRING", "v": "VARCHAR(64)", "c": "CHAR(3)", "bin": "BYTES"}


def _random_text(rng: random.Random) -> str:
    # Lengths around the 7-byte inline limit and the 8-byte word size; multi-byte characters.
    return "".join(rng.choice("az\u00e9\u65e5\x00") for _ in range(rng.choice([0, 1, 3, 6, 7, 8, 9, 15, 16, 17, 40])))


def _key_values(n: int, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    return pa.table({
        "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
        "i8": pa.array([maybe(rng.randint(-128, 127)) for _ in range(n)], pa.int8()),
        "i16": pa.array([maybe(rng.randint(-2**15, 2**15 - 1)) for _ in range(n)], pa.int16()),
        "i32": pa.array([maybe(rng.randint(-2**31, 2**31 - 1)) for _ in range(n)], pa.int32()),
        "i64": pa.array([maybe(rng.randint(-2**63, 2**63 - 1)) for _ in range(n)], pa.int64()),
        "d": pa.array([maybe(datetime.date(1970, 1, 1) + datetime.timedelta(days=rng.randint(-40000, 40000)))
                       for _ in range(n)], pa.date32()),
        "s": pa.array([maybe(_random_text(rng)) for _ in range(n)], pa.string()),
        "v": pa.array([_random_text(rng) for _ in range(n)], pa.string()),
        "c": pa.array([maybe(_random_text(rng)[:3]) for _ in range(n)], pa.string()),
        "bin": pa.array([maybe(_random_text(rng).encode()) for _ in range(n)], pa.binary()),
    })


@pytest.mark.parametrize("keys", [["i64"], ["i32"], ["i16"], ["i8"], ["b"], ["d"], ["s"], ["v"], ["c"],
                                  ["bin"], ["s", "i64", "v"], ["i32", "v", "bin", "d", "b"], list(KEY_TYPES)])
def test_key_hash_expression_is_paimons_binary_row_hash(spark: Any, keys: list[str]) -> None:
    from pyspark.sql import functions as F

    data = _key_values(2_000)
    df = spark.createDataFrame(data)
    types = [DataType.parse(KEY_TYPES[k]) for k in keys]
    expression = key_hash_expression([(F.col(k), df.schema[k].dataType, t) for k, t in zip(keys, types, strict=True)])
    assert expression is not None
    got = np.array([r[0] for r in df.select(expression).collect()], dtype=np.int32)
    expected = hash_rows([data.column(k) for k in keys], types)
    assert (got == expected).all(), f"{int((got != expected).sum())} of {len(got)} hashes differ"


def test_key_hash_expression_declines_what_it_cannot_lay_out(spark: Any) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, DoubleType, IntegerType, LongType, TimestampType

    unsupported = [(LongType(), "INT"),  # narrowing: the UDF path casts with overflow checks
                   (DoubleType(), "DOUBLE"), (DecimalType(10, 2), "DECIMAL(10, 2)"),
                   (TimestampType(), "TIMESTAMP(6)"), (IntegerType(), "STRING")]
    for spark_type, paimon in unsupported:
        assert key_hash_expression([(F.col("x"), spark_type, DataType.parse(paimon))]) is None
    assert key_hash_expression([(F.col("x"), IntegerType(), DataType.parse("BIGINT"))]) is not None
    assert key_hash_expression([]) is None


def _routed_tasks(spark: Any, table: Any, df: Any) -> dict[int, Counter[tuple[Any, int]]]:
    """(partition values, bucket) -> rows, per write task, from the packed rows `route_rows` makes."""
    from pyspark.sql import functions as F

    routed = route_rows(df, table, TableRef.of(table)).withColumn("task", F.spark_partition_id())
    codec = table.store.partition_codec()
    keys = table.schema.bucket_keys
    per_task: dict[int, Counter[tuple[Any, int]]] = {}
    for row in routed.collect():
        batch = pa.RecordBatch.from_pylist([row.asDict()])
        for _, packed in unpack_routed(batch.drop_columns(["task"])):
            data = pa.Table.from_batches([packed])
            part_ids, partitions = codec.group_rows(data)
            buckets = bucket_of(hash_rows([data.column(k) for k in keys], table.schema.types_of(keys)),
                                table.options.bucket)
            counter = per_task.setdefault(row["task"], Counter())
            for pid, bucket in zip(part_ids.tolist(), buckets.tolist(), strict=True):
                counter[(partitions[pid].values, bucket)] += 1
    return per_task


def test_unpartitioned_buckets_each_get_their_own_task(spark: Any, catalog: Catalog) -> None:
    table = create_table(catalog, "flat", ORDERS, primary_keys=["id"], options={"bucket": 4})
    assert write_task_count(spark, table) == 4  # shuffle partitions = 4 = buckets
    per_task = _routed_tasks(spark, table, spark.createDataFrame(orders(2_000)).repartition(3))

    assert sorted(per_task) == [0, 1, 2, 3]
    assert sorted(b for c in per_task.values() for (_, b) in c) == [0, 1, 2, 3]  # one bucket per task
    assert sum(sum(c.values()) for c in per_task.values()) == 2_000


def test_partitioned_buckets_are_in_exactly_one_task_and_spread(spark: Any, catalog: Catalog) -> None:
    table = create_table(catalog, "spread", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 4})
    per_task = _routed_tasks(spark, table, spark.createDataFrame(orders(3_000, days=5)).repartition(3))

    owners: dict[tuple[Any, int], set[int]] = {}
    for task, counter in per_task.items():
        for key in counter:
            owners.setdefault(key, set()).add(task)
    assert len(owners) == 5 * 4 and all(len(tasks) == 1 for tasks in owners.values())
    # The 4 buckets of each partition land in 4 different tasks (consecutive, from a spread).
    for day in {dt for (dt,), _ in owners}:
        assert len({next(iter(owners[((day,), b)])) for b in range(4)}) == 4


def test_unpartitioned_fixed_bucket_write_equals_the_engines_write(spark: Any, catalog: Catalog) -> None:
    ours = create_table(catalog, "flat_spark", ORDERS, primary_keys=["id"], options={"bucket": 3})
    theirs = create_table(catalog, "flat_engine", ORDERS, primary_keys=["id"], options={"bucket": 3})
    data = orders(500)
    spark_write(spark.createDataFrame(data).repartition(4), ours)
    engine_write(theirs, data)

    assert rows(read(ours), "id") == rows(read(theirs), "id") == rows(data, "id")
    assert key_buckets(ours) == key_buckets(theirs)
    assert len(live_file_names(ours)) == 3  # one writer per bucket


def test_later_rows_of_a_key_win_across_many_packed_streams(spark: Any, catalog: Catalog,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # 60,000 rows with 100-byte payloads, in one input partition, routed in chunks of 4,096
    # rows: several packed streams per write task, each of several chunks. Every key appears
    # three times, the last time with its final value.
    monkeypatch.setattr(routing, "_PACK_CHUNK_ROWS", 4_096)  # the packer takes it on the driver
    table = create_table(catalog, "order_kept", pa.schema([
        pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())]),
        primary_keys=["id"], options={"bucket": 2})
    ids = np.tile(np.arange(20_000), 3)
    versions = np.repeat([f"{name}-" + "x" * 90 for name in ("first", "second", "final")], 20_000)
    df = spark.createDataFrame(pa.table({"id": ids, "v": versions})).coalesce(1)
    cells = Counter(r[0] for r in route_rows(df, table, TableRef.of(table)).select(ROUTE_COLUMN).collect())
    assert len(cells) == 2 and min(cells.values()) >= 3
    spark_write(df, table)

    result = read(table)
    assert result.num_rows == 20_000
    assert set(result.column("v").to_pylist()) == {"final-" + "x" * 90}


@pytest.mark.parametrize("sizes", [[3, 0, 4, 1, 9, 2], [25], [0], [], [5, 5]])
def test_rechunk_combines_small_batches_and_slices_large_ones_in_order(sizes: list[int]) -> None:
    counter = iter(range(sum(sizes)))
    batches = [pa.record_batch({"i": [next(counter) for _ in range(n)]}) for n in sizes]
    chunks = list(rechunk(batches, 5))
    assert [c.num_rows for c in chunks] == [5] * (sum(sizes) // 5) + ([sum(sizes) % 5] if sum(sizes) % 5 else [])
    assert [v for c in chunks for v in c.column("i").to_pylist()] == list(range(sum(sizes)))


def test_bucket_column_equals_the_engines_buckets(spark: Any, catalog: Catalog) -> None:
    from pyspark.sql import functions as F

    ts_schema = pa.schema([pa.field("at", pa.timestamp("ms"), nullable=False),
                           pa.field("price", pa.decimal128(10, 2), nullable=False),
                           pa.field("name", pa.string(), nullable=False), pa.field("x", pa.int64())])
    base = datetime.datetime(2026, 11, 21)
    data = pa.table({
        "at": [base + datetime.timedelta(milliseconds=7 * i) for i in range(400)],
        "price": [decimal.Decimal(i) / 4 for i in range(400)],
        "name": [f"n{i}" * (i % 5) for i in range(400)],
        "x": list(range(400)),
    }, schema=ts_schema)
    for keys in (["name"], ["at", "price"]):  # expressions; the Arrow UDF fallback
        table = create_table(catalog, f"bc_{'_'.join(keys)}", ts_schema, primary_keys=keys,
                             options={"bucket": 5})
        df = spark.createDataFrame(data)
        got = {tuple(r[:-1]): r[-1] for r in df.select(*keys, bucket_column(df, table, TableRef.of(table))
                                                         .alias("bucket")).collect()}
        expected = bucket_of(hash_rows([data.column(k) for k in keys], table.schema.types_of(keys)), 5)
        assert [got[tuple(r[k] for k in keys)] for r in data.to_pylist()] == expected.tolist()
        assert df.select(bucket_column(df, table, TableRef.of(table)).alias("b")).agg(
            F.countDistinct("b")).first()[0] == 5


def test_dynamic_routing_puts_each_assigner_in_its_own_task(spark: Any, catalog: Catalog) -> None:
    table = create_table(catalog, "dyn_route", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": -1, "dynamic-bucket.target-row-num": 50})
    routed = route_rows(spark.createDataFrame(orders(600)).repartition(3), table, TableRef.of(table), 3)
    from pyspark.sql import functions as F

    placed = routed.select(ASSIGNER_COLUMN, ROUTE_COLUMN, F.spark_partition_id().alias("task")).collect()
    assert {(r[ASSIGNER_COLUMN], r["task"]) for r in placed} == {(0, 0), (1, 1), (2, 2)}
