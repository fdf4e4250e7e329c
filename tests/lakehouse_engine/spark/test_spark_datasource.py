"""The `lakehouse` data source: Spark reads equal engine reads (latest, by snapshot id, by tag,
with filters and pruning options), a DataFrame keeps reading its snapshot, Spark's reuse of
pushdown state cannot change a result, and `df.write.format("lakehouse")` writes like the engine."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows
from tests.lakehouse_engine.conftest import write as engine_write
from tests.lakehouse_engine.spark.conftest import ORDERS, key_buckets, orders

pytestmark = pytest.mark.spark

FIRST, SECOND = orders(120), orders(60, start=90, tag="v2")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`db.orders` (bucket 3, partitioned by dt): snapshot 1 = FIRST, snapshot 2 = SECOND upserted."""
    path = str(tmp_path_factory.mktemp("ds") / "warehouse")
    catalog = Catalog(path)
    catalog.create_database("db")
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 3})
    engine_write(table, FIRST)
    engine_write(table, SECOND)
    return path


@pytest.fixture
def table(warehouse: str) -> FileStoreTable:
    return Catalog(warehouse).get_table("db.orders")


def _load(spark: Any, warehouse: str, **options: str) -> Any:
    reader = spark.read.format("lakehouse").option("warehouse", warehouse)
    for key, value in options.items():
        reader = reader.option(key.replace("_", "-"), value)
    return reader.load("db.orders")


def _engine(table: FileStoreTable, where: Callable[[PredicateBuilder], Predicate] | None = None,
            **kw: Any) -> list[dict[str, Any]]:
    pb = table.new_read_builder().new_predicate_builder()
    return rows(read(table, predicate=where(pb) if where else None, **kw), "id")


def test_reads_equal_engine_reads_at_the_latest_snapshot_and_by_id(
        spark: Any, warehouse: str, table: FileStoreTable) -> None:
    latest = _load(spark, warehouse)
    assert latest.schema.simpleString() == (
        "struct<id:bigint,dt:string,name:string,amount:decimal(12,2),ts:timestamp_ntz>")
    assert rows(latest.toArrow(), "id") == _engine(table)
    first = _load(spark, warehouse, snapshot_id="1")
    assert rows(first.toArrow(), "id") == _engine(table, snapshot_id=1) == rows(FIRST, "id")


def test_reads_equal_engine_reads_with_filters(spark: Any, warehouse: str, table: FileStoreTable) -> None:
    df = _load(spark, warehouse)
    cases: list[tuple[str, Callable[[PredicateBuilder], Predicate]]] = [
        ("dt = '2026-11-22'", lambda pb: pb.equal("dt", "2026-11-22")),
        ("id >= 100 AND dt <> '2026-11-21'",
         lambda pb: pb.and_predicates([pb.greater_or_equal("id", 100), pb.not_equal("dt", "2026-11-21")])),
        ("name IS NULL OR id IN (1, 2, 3)",
         lambda pb: pb.or_predicates([pb.is_null("name"), pb.is_in("id", [1, 2, 3])])),
        ("name LIKE 'v2-1%'", lambda pb: pb.startswith("name", "v2-1")),
        ("amount > 40", lambda pb: pb.greater_than("amount", decimal.Decimal(40))),
    ]
    for sql, where in cases:
        assert rows(df.filter(sql).toArrow(), "id") == _engine(table, where), sql


def test_input_partitions_are_the_engines_splits(spark: Any, warehouse: str, table: FileStoreTable) -> None:
    splits = table.new_read_builder().new_scan().plan().splits()
    assert _load(spark, warehouse).rdd.getNumPartitions() == len(splits) == 9


def test_columns_option_and_a_user_schema_prune_columns(
        spark: Any, warehouse: str, table: FileStoreTable) -> None:
    by_option = _load(spark, warehouse, columns="id, name")
    assert by_option.columns == ["id", "name"]
    assert rows(by_option.toArrow(), "id") == _engine(table, projection=["id", "name"])
    by_schema = (spark.read.format("lakehouse").option("warehouse", warehouse)
                 .schema("amount DECIMAL(12,2), id BIGINT").load("db.orders"))
    assert rows(by_schema.toArrow(), "id") == _engine(table, projection=["amount", "id"])
    with pytest.raises(Exception, match="not columns of table db.orders"):
        (spark.read.format("lakehouse").option("warehouse", warehouse)
         .schema("id INT").load("db.orders").collect())


def test_partitions_option_reads_only_those_partitions(
        spark: Any, warehouse: str, table: FileStoreTable) -> None:
    df = _load(spark, warehouse, partitions="dt=2026-11-21;dt=2026-11-23")
    assert df.rdd.getNumPartitions() == 6  # 2 partitions x 3 buckets: the third is never opened
    assert rows(df.toArrow(), "id") == _engine(table, lambda pb: pb.is_in("dt", ["2026-11-21", "2026-11-23"]))
    with pytest.raises(Exception, match="not <partition key>=<value>"):
        _load(spark, warehouse, partitions="id=3").collect()


def test_tag_option_reads_the_tagged_snapshot(spark: Any, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    tagged = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                          options={"bucket": 3})
    engine_write(tagged, FIRST)
    tagged.create_tag("first")
    engine_write(tagged, SECOND)
    df = _load(spark, catalog.warehouse, tag="first")
    assert rows(df.toArrow(), "id") == rows(FIRST, "id")
    with pytest.raises(Exception, match="exclude each other"):
        _load(spark, catalog.warehouse, tag="first", snapshot_id="1").collect()


def test_a_dataframe_keeps_reading_the_snapshot_it_was_loaded_at(spark: Any, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 2})
    engine_write(table, orders(10))
    df = _load(spark, catalog.warehouse)
    assert df.count() == 10
    engine_write(table, orders(10, start=10))
    assert df.count() == df.filter("id >= 0").count() == 10
    assert _load(spark, catalog.warehouse).count() == 20


def test_a_filtered_query_never_changes_what_the_next_query_reads(spark: Any, warehouse: str) -> None:
    # Spark 4.1-4.3 keep a Python data source's pushdown result on the DataFrame's relation and
    # reuse it for every later scan of it: had the filters pruned the read, the second count
    # would see 50 rows and the union [7, 7].
    every_day = "dt=2026-11-21;dt=2026-11-22;dt=2026-11-23"
    for df in (_load(spark, warehouse), _load(spark, warehouse, partitions=every_day)):
        assert df.filter("dt = '2026-11-21'").count() == 50
        assert df.count() == 150
        both = df.filter("id = 5").unionByName(df.filter("id = 7"))
        assert sorted(r.id for r in both.collect()) == [5, 7]


def test_dataframe_writer_appends_and_overwrites(spark: Any, catalog: Catalog) -> None:
    # Two tasks write each bucket: were they to compact (trigger 2), both would rewrite it.
    ours = create_table(catalog, "ds_write", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": 3, "num-sorted-run.compaction-trigger": 2})
    theirs = create_table(catalog, "ds_ref", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                          options={"bucket": 3})

    def save(data: pa.Table, mode: str) -> None:
        (spark.createDataFrame(data).repartition(2).write.format("lakehouse").mode(mode)
         .option("warehouse", catalog.warehouse).save("db.ds_write"))

    save(FIRST, "append")
    engine_write(theirs, FIRST)
    assert rows(read(ours), "id") == rows(read(theirs), "id")
    assert key_buckets(ours) == key_buckets(theirs)
    assert [s.commit_kind for s in ours.snapshots()] == ["APPEND"]

    save(SECOND, "overwrite")
    assert rows(read(ours), "id") == rows(SECOND, "id")
    assert [s.commit_kind for s in ours.snapshots()] == ["APPEND", "OVERWRITE"]


def test_dataframe_writer_of_a_lookup_table_takes_level_0_up_with_its_changelog_after_the_commit(
        spark: Any, catalog: Catalog) -> None:
    # Its tasks write level 0 only (two of them share each bucket); as Paimon's Spark write of a
    # `lookup` table compacts, the driver takes the written buckets' level 0 up after the commit,
    # in a COMPACT snapshot with their changelog: a stream receives every row, each change once.
    t = create_table(catalog, "ds_lookup", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": 3, "changelog-producer": "lookup"})

    def save(data: pa.Table) -> None:
        (spark.createDataFrame(data).repartition(2).write.format("lakehouse").mode("append")
         .option("warehouse", catalog.warehouse).save("db.ds_lookup"))

    save(FIRST)
    save(SECOND)
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "COMPACT", "APPEND", "COMPACT"]
    latest = t.latest_snapshot()
    assert latest is not None
    assert not any(e.file.level == 0 for e in t.store.manifest_io().live_entries(latest))
    state: dict[tuple[Any, Any], Any] = {}
    for r in t.changes(0).to_pylist():
        key = (r["id"], r["dt"])
        if r["_row_kind"] in ("+I", "+U"):
            assert key not in state
            state[key] = r["name"]
        else:
            assert state.pop(key) == r["name"]
    assert state == {(r["id"], r["dt"]): r["name"] for r in read(t).to_pylist()}


def test_dataframe_writer_rejects_dynamic_bucket_tables(spark: Any, catalog: Catalog) -> None:
    create_table(catalog, "ds_dyn", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"])
    with pytest.raises(Exception, match="dynamic bucket"):
        (spark.createDataFrame(orders(3)).write.format("lakehouse").mode("append")
         .option("warehouse", catalog.warehouse).save("db.ds_dyn"))
