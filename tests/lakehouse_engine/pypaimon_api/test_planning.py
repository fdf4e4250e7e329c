"""Planning as pypaimon plans: a filter that fixes the bucket key reads only the buckets its
values hash to, per partition for an OR of (partition AND key) terms; merge-tree splits follow
`source.split.*`."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import CatalogFactory, Schema
from lakehouse_engine.read.predicate import PredicateBuilder

PA_SCHEMA = pa.schema([pa.field("part", pa.string(), nullable=False),
                       pa.field("id", pa.int64(), nullable=False), ("val", pa.int64())])


@pytest.fixture
def catalog(tmp_path: Path):
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("default", False)
    return catalog


def _table(catalog, name: str, options: dict[str, str], ids=range(1, 4)):
    catalog.create_table(f"default.{name}", Schema.from_pyarrow_schema(
        PA_SCHEMA, primary_keys=["part", "id"], partition_keys=["part"], options=options), False)
    table = catalog.get_table(f"default.{name}")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pylist(
        [{"part": p, "id": i, "val": i * 7} for p in ("a", "b") for i in ids], schema=PA_SCHEMA))
    wb.new_commit().commit(w.prepare_commit())
    return table


def _read(table, predicate):
    rb = table.new_read_builder().with_filter(predicate)
    splits = rb.new_scan().plan().splits()
    rows = rb.new_read().to_arrow(splits).to_pylist()
    return splits, sorted((r["part"], r["id"]) for r in rows)


def test_per_partition_bucket_pruning_for_an_or_of_key_terms(catalog) -> None:
    table = _table(catalog, "mixed_or", {"bucket": "4"})
    pb = table.new_read_builder().new_predicate_builder()
    mixed = PredicateBuilder.or_predicates([
        PredicateBuilder.and_predicates([pb.equal("part", "a"), pb.equal("id", 1)]),
        PredicateBuilder.and_predicates([pb.equal("part", "b"), pb.equal("id", 2)]),
    ])
    splits, rows = _read(table, mixed)
    assert rows == [("a", 1), ("b", 2)]
    assert len(splits) <= 2
    all_splits = table.new_read_builder().new_scan().plan().splits()
    assert len(all_splits) > len(splits)


def test_in_on_the_bucket_key_reads_only_its_buckets(catalog) -> None:
    table = _table(catalog, "in_keys", {"bucket": "8"}, ids=range(1, 40))
    pb = table.new_read_builder().new_predicate_builder()
    splits, rows = _read(table, pb.is_in("id", [3, 5, None]))
    assert rows == [("a", 3), ("a", 5), ("b", 3), ("b", 5)]
    assert len(splits) <= 4
    _, none = _read(table, pb.is_in("id", [None]))
    assert none == []


def test_a_filter_that_does_not_pin_the_key_reads_every_bucket(catalog) -> None:
    table = _table(catalog, "no_pin", {"bucket": "4"})
    pb = table.new_read_builder().new_predicate_builder()
    everything = len(table.new_read_builder().new_scan().plan().splits())
    for predicate in (pb.greater_than("id", 0), pb.or_predicates([pb.equal("id", 1), pb.equal("val", 14)]),
                      pb.equal("val", 7)):
        splits, _ = _read(table, predicate)
        assert len(splits) == everything


def test_merge_tree_splits_follow_source_split_options(catalog) -> None:
    small = _table(catalog, "small_splits", {"bucket": "1", "write-only": "true",
                                             "source.split.target-size": "1b",
                                             "source.split.open-file-cost": "1b"})
    big = _table(catalog, "big_splits", {"bucket": "1", "write-only": "true"})
    for table in (small, big):
        for i in range(3):
            wb = table.new_batch_write_builder()
            w = wb.new_write()
            w.write_arrow(pa.Table.from_pylist([{"part": "a", "id": 100 + 10 * i, "val": 0}], schema=PA_SCHEMA))
            wb.new_commit().commit(w.prepare_commit())
    small_splits = [s for s in small.new_read_builder().new_scan().plan().splits() if s.partition.to_dict()["part"] == "a"]
    big_splits = [s for s in big.new_read_builder().new_scan().plan().splits() if s.partition.to_dict()["part"] == "a"]
    assert (len(big_splits), len(small_splits)) == (1, 4)  # four non-overlapping sorted runs


def test_split_partition_values_are_a_list_as_pypaimons_row(catalog) -> None:
    table = _table(catalog, "values", {"bucket": "1"})
    pb = table.new_read_builder().new_predicate_builder()
    splits = table.new_read_builder().with_filter(pb.equal("part", "b")).new_scan().plan().splits()
    assert [s.partition.values for s in splits] == [["b"]]
    assert [s.partition_values for s in splits] == [("b",)]


def _sharded(table, n: int) -> list[list]:
    rb = table.new_read_builder()
    out = []
    for i in range(n):
        splits = rb.new_scan().with_shard(i, n).plan().splits()
        out.append(sorted(r["id"] for r in rb.new_read().to_arrow(splits).to_pylist()))
    return out


def test_with_shard_splits_a_plan_into_disjoint_parts_that_make_the_whole(catalog) -> None:
    pk = _table(catalog, "pk", {"bucket": "3"}, ids=range(30))
    shards = _sharded(pk, 3)
    assert sorted(i for s in shards for i in s) == sorted(list(range(30)) * 2)  # two partitions
    for i, _ in enumerate(shards):  # a primary-key table shards by bucket, as Paimon
        assert {sp.bucket % 3 for sp in pk.new_read_builder().new_scan().with_shard(i, 3).plan().splits()} <= {i}

    catalog.create_table("default.log", Schema.from_pyarrow_schema(PA_SCHEMA), False)
    log = catalog.get_table("default.log")
    for chunk in range(6):  # six files in one bucket: an append table shards by file
        wb = log.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.Table.from_pylist([{"part": "a", "id": chunk * 10 + i, "val": 0} for i in range(10)],
                                           schema=PA_SCHEMA))
        wb.new_commit().commit(w.prepare_commit())
    shards = _sharded(log, 2)
    assert sorted(shards[0] + shards[1]) == list(range(60)) and not set(shards[0]) & set(shards[1])
    for bad in ((3, 3), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="with_shard"):
            log.new_read_builder().new_scan().with_shard(*bad)
