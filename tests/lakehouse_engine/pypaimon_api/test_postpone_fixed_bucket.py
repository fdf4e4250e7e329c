"""pypaimon's `new_postpone_fixed_bucket_write_builder()`: a batch write of a postpone-bucket table
goes straight to fixed buckets and reads at once; a new partition's bucket count comes from its
input, an existing partition keeps its own, and writers that disagree on a count never commit both."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import CatalogFactory, Schema
from lakehouse_engine.errors import CommitConflictError, SchemaError
from lakehouse_engine.types import DataType
from lakehouse_engine.write.postpone_fixed import (
    PostponeBucketPlan,
    PostponeFixedBucketWrite,
    PostponeFixedBucketWriteBuilder,
    binary_row_sizes,
)

PA_SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                       ("value", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path):
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("default", False)
    return catalog


def _postpone_table(catalog, name: str, options: dict | None = None, schema: pa.Schema = PA_SCHEMA,
                    partition_keys: tuple[str, ...] = ("dt",)):
    opts = {"bucket": "-2", "postpone.target-size-per-bucket": "100 b",
            "postpone.batch-write-fixed-bucket.max-parallelism": "3", **(options or {})}
    catalog.create_table(f"default.{name}", Schema.from_pyarrow_schema(
        schema, partition_keys=list(partition_keys), primary_keys=["id", *partition_keys], options=opts), False)
    return catalog.get_table(f"default.{name}")


def _rows(table) -> list[tuple]:
    rb = table.new_read_builder()
    return sorted(tuple(r.values()) for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())


def _commit(table, rows: list[tuple], fixed: bool = True) -> list:
    builder = table.new_postpone_fixed_bucket_write_builder() if fixed else table.new_batch_write_builder()
    write = builder.new_write()
    write.write_arrow(pa.Table.from_pylist([dict(zip(PA_SCHEMA.names, r, strict=True)) for r in rows], schema=PA_SCHEMA))
    messages = write.prepare_commit()
    builder.new_commit().commit(messages)
    write.close()
    return messages


def test_a_new_partition_gets_buckets_from_its_input_size_and_reads_at_once(catalog) -> None:
    table = _postpone_table(catalog, "sized")
    builder = table.new_postpone_fixed_bucket_write_builder()
    assert isinstance(builder, PostponeFixedBucketWriteBuilder)
    write = builder.new_write()
    assert isinstance(write, PostponeFixedBucketWrite)
    write.write_arrow(pa.Table.from_pydict({"id": [1, 2], "dt": ["small", "large"], "value": ["x", "x" * 500]},
                                           schema=PA_SCHEMA))
    messages = write.prepare_commit()
    # 'small': one 32-byte row (< 100 b): 1 bucket; 'large': 536 bytes, capped at max-parallelism 3
    assert {tuple(m.partition): m.total_buckets for m in messages} == {("small",): 1, ("large",): 3}
    assert {m.bucket for m in messages} <= {0, 1, 2}
    builder.new_commit().commit(messages)
    assert _rows(table) == [(1, "small", "x"), (2, "large", "x" * 500)]


def test_binary_row_sizes_count_as_paimons_binary_rows() -> None:
    rows = pa.Table.from_pydict({"id": [1, 2], "dt": ["small", "eight-by"], "value": [None, "x" * 9]},
                                schema=PA_SCHEMA)

    types = [DataType.parse("INT"), DataType.parse("STRING"), DataType.parse("STRING")]
    # 8 bytes of null bits + 3 * 8 fixed; strings over 7 bytes in whole words
    assert binary_row_sizes(rows, types).tolist() == [32, 32 + 8 + 16]


def test_an_existing_partition_keeps_its_bucket_count(catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("part", pa.int32(), nullable=False),
                        pa.field("day", pa.date32(), nullable=False), ("value", pa.string())])
    table = _postpone_table(catalog, "reuse", {"postpone.batch-write-fixed-bucket.max-parallelism": "2"},
                            schema=schema, partition_keys=("part", "day"))
    day = datetime.date(2026, 8, 1)

    def write(t, rows):
        builder = t.new_postpone_fixed_bucket_write_builder()
        w = builder.new_write()
        w.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        messages = w.prepare_commit()
        builder.new_commit().commit(messages)
        return {tuple(m.partition): m.total_buckets for m in messages}

    assert write(table, [{"id": 1, "part": 7, "day": day, "value": "x" * 300}]) == {(7, day): 2}
    wider = catalog.get_table("default.reuse").copy({"postpone.batch-write-fixed-bucket.max-parallelism": "3"})
    counts = write(wider, [{"id": 2, "part": 7, "day": day, "value": "x" * 300},
                           {"id": 3, "part": 8, "day": day, "value": "x" * 300}])
    assert counts == {(7, day): 2, (8, day): 3}
    assert [r[0] for r in _rows(wider)] == [1, 2, 3]


def test_default_bucket_num_and_target_row_num_decide_a_new_partitions_buckets(catalog) -> None:
    explicit = _postpone_table(catalog, "explicit", {"postpone.default-bucket-num": "4"})
    assert {m.total_buckets for m in _commit(explicit, [(1, "a", "x" * 500)])} == {4}
    by_rows = _postpone_table(catalog, "by_rows", {"postpone.target-row-num-per-bucket": "2"})
    assert {m.total_buckets for m in _commit(by_rows, [(i, "a", "v") for i in range(5)])} == {3}


def test_a_partition_with_postponed_rows_stays_postponed_so_newer_rows_win(catalog) -> None:
    table = _postpone_table(catalog, "legacy")
    _commit(table, [(1, "p", "old")], fixed=False)  # the plain builder: the postpone bucket
    assert _rows(table) == []
    messages = _commit(table, [(1, "p", "new"), (2, "q", "fresh")])
    assert sorted((tuple(m.partition), m.bucket) for m in messages) == [(("p",), -2), (("q",), 0)]
    assert _rows(table) == [(2, "q", "fresh")]
    table.compact()
    assert _rows(table) == [(1, "p", "new"), (2, "q", "fresh")]


def test_files_of_one_partition_with_two_bucket_counts_never_commit(catalog) -> None:
    table = _postpone_table(catalog, "mismatch")
    small, large = table.new_postpone_fixed_bucket_write_builder(), table.new_postpone_fixed_bucket_write_builder()
    w_small, w_large = small.new_write(), large.new_write()
    w_small.write_arrow(pa.Table.from_pylist([{"id": 1, "dt": "p", "value": "x"}], schema=PA_SCHEMA))
    w_large.write_arrow(pa.Table.from_pylist([{"id": 2, "dt": "p", "value": "x" * 500}], schema=PA_SCHEMA))
    messages = w_small.prepare_commit() + w_large.prepare_commit()
    assert {m.total_buckets for m in messages} == {1, 3}
    with pytest.raises(RuntimeError, match="Total buckets"):
        small.new_commit().commit(messages)
    assert table.latest_snapshot() is None


def test_a_writer_that_planned_a_new_partition_loses_to_one_that_committed_it(catalog) -> None:
    two = _postpone_table(catalog, "race", {"postpone.batch-write-fixed-bucket.max-parallelism": "2"})
    three = two.copy({"postpone.batch-write-fixed-bucket.max-parallelism": "3"})
    b_two, b_three = two.new_postpone_fixed_bucket_write_builder(), three.new_postpone_fixed_bucket_write_builder()
    w_two, w_three = b_two.new_write(), b_three.new_write()
    for w, i in ((w_two, 1), (w_three, 2)):
        w.write_arrow(pa.Table.from_pylist([{"id": i, "dt": "new", "value": "x" * 500}], schema=PA_SCHEMA))
    m_two, m_three = w_two.prepare_commit(), w_three.prepare_commit()
    b_two.new_commit().commit(m_two)
    with pytest.raises(CommitConflictError, match="Total buckets"):
        b_three.new_commit().commit(m_three)
    assert _rows(two) == [(1, "new", "x" * 500)]


def test_with_the_option_off_the_builder_writes_the_postpone_bucket(catalog) -> None:
    table = _postpone_table(catalog, "off", {"postpone.batch-write-fixed-bucket": "false"})
    assert {m.bucket for m in _commit(table, [(1, "a", "x")])} == {-2}
    assert _rows(table) == []
    with pytest.raises(SchemaError, match="postpone"):
        catalog.create_table("default.fixed", Schema.from_pyarrow_schema(
            PA_SCHEMA, primary_keys=["id"], options={"bucket": "1"}), False)
        catalog.get_table("default.fixed").new_postpone_fixed_bucket_write_builder()


def _planned_write(table, plan: dict, rows: list[tuple], overwrite: dict | None = None) -> list:
    builder = table.new_postpone_fixed_bucket_write_builder().with_bucket_plan(PostponeBucketPlan(plan))
    if overwrite is not None:
        builder.overwrite(overwrite)
    write, commit = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(pa.Table.from_pylist([dict(zip(PA_SCHEMA.names, r, strict=True)) for r in rows],
                                               schema=PA_SCHEMA))
        messages = write.prepare_commit()
        commit.commit(messages)
    finally:
        write.close()
        commit.close()
    return messages


def test_a_bucket_plan_gives_the_counts_and_an_overwrite_may_rescale(catalog) -> None:
    # pypaimon's test_postpone_overwrite_allows_bucket_rescale.
    table = _postpone_table(catalog, "planned", {"postpone.target-size-per-bucket": "1 b",
                                                 "postpone.batch-write-fixed-bucket.max-parallelism": "2"})
    first = _planned_write(table, {("p",): 4, ("q",): 1}, [(1, "p", "old"), (5, "q", "q1")])
    assert sorted((tuple(m.partition), m.total_buckets) for m in first) == [(("p",), 4), (("q",), 1)]
    rescaled = _planned_write(table, {("p",): 3}, [(2, "p", "new")], overwrite={"dt": "p"})
    assert {m.total_buckets for m in rescaled} == {3}
    assert _rows(table) == [(2, "p", "new"), (5, "q", "q1")]
    splits = table.new_read_builder().new_scan().plan().splits()
    assert sorted({(tuple(s.partition.values), s.total_buckets) for s in splits}) == [(("p",), 3), (("q",), 1)]


def test_a_bucket_plan_must_cover_every_partition_and_rescales_only_by_overwrite(catalog) -> None:
    table = _postpone_table(catalog, "strict_plan")
    _planned_write(table, {("p",): 2}, [(1, "p", "a")])
    with pytest.raises(ValueError, match=r"Missing bucket plan for partition \('q',\)"):
        _planned_write(table, {("p",): 2}, [(2, "q", "b")])
    with pytest.raises(ValueError, match="only an overwrite of the partition may rescale it"):
        _planned_write(table, {("p",): 5}, [(3, "p", "c")])
    with pytest.raises(ValueError, match="positive 32-bit integer"):
        PostponeBucketPlan({("p",): 0})
    with pytest.raises(ValueError, match="is partitioned by"):
        _planned_write(table, {("p", 1): 2}, [(3, "p", "c")])
    assert _rows(table) == [(1, "p", "a")] and table.latest_snapshot().id == 1
