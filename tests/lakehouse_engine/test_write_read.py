"""Write and read behaviour of primary-key and append tables."""

from __future__ import annotations

import datetime as dt
import decimal
from decimal import Decimal

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, SnapshotNotExistError
from lakehouse_engine.read.predicate import PredicateBuilder
from tests.lakehouse_engine.conftest import create_table, read, rows, write

ORDERS = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("amount", pa.decimal128(12, 2)),
    pa.field("note", pa.string()),
    pa.field("ts", pa.timestamp("us")),
    pa.field("rk", pa.string()),
])


def orders(ids: list[int], dts: list[str], amounts: list[str], kinds: list[str] | None = None) -> pa.Table:
    n = len(ids)
    return pa.table({
        "id": ids, "dt": dts, "amount": [Decimal(a) for a in amounts],
        "note": [f"note-{i}-long-enough" for i in ids],
        "ts": [dt.datetime(2026, 11, 1, 12, 0, i % 60) for i in ids],
        "rk": kinds or ["+I"] * n,
    }, schema=ORDERS)


@pytest.fixture
def orders_table(catalog: Catalog):
    return create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options={"bucket": "4", "rowkind.field": "rk"})


def test_upserts_and_deletes_merge_to_the_latest_row_per_key(orders_table) -> None:
    write(orders_table, orders([1, 2, 3], ["a", "a", "b"], ["1.00", "2.00", "3.00"]))
    write(orders_table, orders([2, 3, 4], ["a", "b", "b"], ["20.00", "0", "4.00"], ["+U", "-D", "+I"]))
    got = rows(read(orders_table, projection=["id", "dt", "amount"]), "id")
    assert got == [
        {"id": 1, "dt": "a", "amount": Decimal("1.00")},
        {"id": 2, "dt": "a", "amount": Decimal("20.00")},
        {"id": 4, "dt": "b", "amount": Decimal("4.00")},
    ]


def test_duplicate_keys_in_one_batch_keep_the_last(orders_table) -> None:
    write(orders_table, orders([7, 7, 7], ["a", "a", "a"], ["1", "2", "3"]))
    assert [r["amount"] for r in read(orders_table).to_pylist()] == [Decimal("3.00")]
    entries = orders_table.store.manifest_io().live_entries(orders_table.latest_snapshot())
    assert [e.file.row_count for e in entries] == [1]
    assert entries[0].file.min_sequence_number == 2  # numbers were handed to all three rows


def test_sequence_numbers_continue_from_what_the_bucket_holds(orders_table) -> None:
    write(orders_table, orders([1], ["a"], ["1"]))
    write(orders_table, orders([1], ["a"], ["2"]))
    files = sorted((e.file.min_sequence_number, e.file.max_sequence_number)
                   for e in orders_table.store.manifest_io().live_entries(orders_table.latest_snapshot()))
    assert files == [(0, 0), (1, 1)]


def test_time_travel_reads_each_snapshot(orders_table) -> None:
    (s1,) = write(orders_table, orders([1], ["a"], ["1"]))
    (s2,) = write(orders_table, orders([1, 2], ["a", "a"], ["5", "6"]))
    assert [r["amount"] for r in rows(read(orders_table, s1), "id")] == [Decimal("1.00")]
    assert [r["amount"] for r in rows(read(orders_table, s2), "id")] == [Decimal("5.00"), Decimal("6.00")]
    copy = orders_table.copy({"scan.snapshot-id": str(s1)})
    assert read(copy).num_rows == 1
    with pytest.raises(SnapshotNotExistError, match="snapshot 9"):
        read(orders_table, 9)


def test_predicates_prune_partitions_and_filter_rows(orders_table) -> None:
    write(orders_table, orders(list(range(20)), ["a"] * 10 + ["b"] * 10, [str(i) for i in range(20)]))
    pb = orders_table.new_read_builder().new_predicate_builder()
    scan_b = orders_table.new_read_builder().with_filter(pb.equal("dt", "b")).new_scan().plan().splits()
    assert {s.partition_values for s in scan_b} == {("b",)}
    cases = {
        pb.equal("id", 3): [3],
        pb.not_equal("dt", "a"): list(range(10, 20)),
        pb.less_than("id", 2): [0, 1],
        pb.less_or_equal("id", 2): [0, 1, 2],
        pb.greater_than("id", 17): [18, 19],
        pb.greater_or_equal("id", 18): [18, 19],
        pb.is_in("id", [4, 15, 99]): [4, 15],
        pb.is_null("note"): [],
        pb.is_not_null("note"): list(range(20)),
        pb.and_predicates([pb.equal("dt", "a"), pb.greater_than("amount", Decimal("7"))]): [8, 9],
        pb.greater_than("amount", 17): [18, 19],  # an int literal on a DECIMAL(12, 2) column
        pb.or_predicates([pb.equal("id", 1), pb.equal("id", 19)]): [1, 19],
    }
    for predicate, expected in cases.items():
        assert sorted(read(orders_table, predicate=predicate).column("id").to_pylist()) == expected, predicate


def test_key_range_statistics_skip_files(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
    t = create_table(catalog, "ranges", schema, primary_keys=["id"], options={"bucket": "1"})
    write(t, pa.table({"id": list(range(0, 100)), "v": [0] * 100}, schema=schema))
    write(t, pa.table({"id": list(range(1000, 1100)), "v": [1] * 100}, schema=schema))
    pb = PredicateBuilder(t.schema.field_names)
    splits = t.new_read_builder().with_filter(pb.greater_than("id", 500)).new_scan().plan().splits()
    assert sum(len(s.files) for s in splits) == 1
    assert read(t, predicate=pb.greater_than("id", 1097)).column("id").to_pylist() == [1098, 1099]


def test_decimal_filters_take_int_and_float_literals(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("price", pa.decimal128(10, 2))])
    t = create_table(catalog, "prices", schema, primary_keys=["id"], options={"bucket": "1"})
    prices = [decimal.Decimal(x) for x in ("1.50", "2.00", "3.25", "1.50")]
    write(t, pa.table({"id": [1, 2, 3, 4], "price": prices}, schema=schema))
    pb = t.new_read_builder().new_predicate_builder()
    for predicate, ids in ((pb.is_in("price", [1.5, 2]), [1, 2, 4]), (pb.is_not_in("price", [1.5]), [2, 3]),
                           (pb.equal("price", 3.25), [3]), (pb.between("price", 1.6, 3), [2])):
        assert sorted(read(t, predicate=predicate).column("id").to_pylist()) == ids


def test_overwrite_replaces_one_partition_or_the_whole_table(orders_table) -> None:
    write(orders_table, orders([1, 2, 3], ["a", "a", "b"], ["1", "2", "3"]))
    write(orders_table, orders([9], ["a"], ["9"]), overwrite={"dt": "a"})
    assert rows(read(orders_table, projection=["id", "dt"]), "id") == [
        {"id": 3, "dt": "b"}, {"id": 9, "dt": "a"}]
    assert orders_table.latest_snapshot().commit_kind == "OVERWRITE"
    # `{}` follows dynamic-partition-overwrite (default true): only partition c is replaced ...
    write(orders_table, orders([5], ["c"], ["5"]), overwrite={})
    assert sorted(read(orders_table, projection=["id"]).column("id").to_pylist()) == [3, 5, 9]
    # ... and with the option false, the whole table.
    whole = orders_table.copy({"dynamic-partition-overwrite": "false"})
    write(whole, orders([6], ["c"], ["6"]), overwrite={})
    assert read(orders_table, projection=["id"]).column("id").to_pylist() == [6]
    assert orders_table.latest_snapshot().total_record_count == 1


def test_small_write_buffer_flushes_several_sorted_runs_with_the_same_result(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "buffered", schema, primary_keys=["id"],
                     options={"bucket": "1", "write-buffer-size": "16 kb", "write-only": "true"})
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    for i in range(20):
        ids = list(range(i * 100, i * 100 + 200))  # each batch overlaps the previous one
        w.write_arrow(pa.table({"id": ids, "v": [f"batch-{i}"] * 200}, schema=schema))
        assert w._buffered_bytes <= 16 * 1024 + 200 * 64  # bounded by the buffer, not the input
    c.commit(w.prepare_commit())
    files = t.store.manifest_io().live_entries(t.latest_snapshot())
    assert len(files) > 1 and all(e.file.level == 0 for e in files)
    got = {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert len(got) == 2100
    assert got[150] == "batch-1" and got[2099] == "batch-19" and got[0] == "batch-0"


def test_full_buffer_flushes_several_buckets_at_once_with_the_same_result(catalog: Catalog) -> None:
    # A full buffer flushes its largest buckets on several threads; with a low stop trigger the
    # flushing threads also compact their buckets. The result is the last value of every key.
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "buffered_buckets", schema, primary_keys=["id"],
                     options={"bucket": "4", "write-buffer-size": "48 kb",
                              "num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "3"})
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    for i in range(30):
        ids = list(range(i * 300, i * 300 + 900))  # each batch overlaps the two before it
        w.write_arrow(pa.table({"id": ids, "v": [f"batch-{i}"] * 900}, schema=schema))
    messages = w.prepare_commit()
    c.commit(messages)
    assert len({m.bucket for m in messages}) == 4
    assert sum(len(m.compact_after) for m in messages) > 0  # compacted while flushing
    got = {r["id"]: r["v"] for r in read(t).to_pylist()}
    expected = {k: f"batch-{min(k // 300, 29)}" for k in range(29 * 300 + 900)}
    assert got == expected


def test_files_roll_at_target_file_size(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())])
    t = create_table(catalog, "rolling", schema, primary_keys=["id"],
                     options={"bucket": "1", "target-file-size": "64 kb", "file.compression": "none"})
    n = 20_000
    write(t, pa.table({"id": list(range(n)), "s": [f"{i:032d}" for i in range(n)]}, schema=schema))
    files = [e.file for e in t.store.manifest_io().live_entries(t.latest_snapshot())]
    assert len(files) >= 5
    assert sum(f.row_count for f in files) == n
    # One sorted run: files do not overlap, so the read needs no merge.
    (split,) = t.new_read_builder().new_scan().plan().splits()
    assert split.raw_convertible
    assert read(t).column("id").to_pylist() == list(range(n))


def test_sequence_field_orders_records_of_a_key(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("version", pa.int64()),
                        pa.field("v", pa.string())])
    t = create_table(catalog, "seq", schema, primary_keys=["id"],
                     options={"bucket": "1", "sequence.field": "version"})
    write(t, pa.table({"id": [1, 1], "version": [5, 3], "v": ["new", "old-late"]}, schema=schema))
    write(t, pa.table({"id": [1], "version": [4], "v": ["older"]}, schema=schema))
    assert read(t).column("v").to_pylist() == ["new"]


def test_ignore_delete_keeps_rows(catalog: Catalog) -> None:
    t = create_table(catalog, "ign", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": "2", "rowkind.field": "rk", "ignore-delete": "true"})
    write(t, orders([1], ["a"], ["1"]))
    write(t, orders([1], ["a"], ["1"], ["-D"]))
    assert read(t).num_rows == 1


def test_first_row_keeps_the_first_record(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "first", schema, primary_keys=["id"],
                     options={"bucket": "1", "merge-engine": "first-row"})
    write(t, pa.table({"id": [1, 1], "v": ["first", "second"]}, schema=schema))
    write(t, pa.table({"id": [1, 2], "v": ["third", "x"]}, schema=schema))
    assert rows(read(t), "id") == [{"id": 1, "v": "first"}, {"id": 2, "v": "x"}]


def test_append_tables_unaware_and_fixed_bucket(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("dt", pa.string()), pa.field("v", pa.float64())])
    unaware = create_table(catalog, "log", schema, partition_keys=["dt"])
    write(unaware, pa.table({"id": [1, 1, 2], "dt": ["a", "a", "b"], "v": [1.0, 1.0, 2.0]}, schema=schema))
    write(unaware, pa.table({"id": [1], "dt": ["a"], "v": [3.0]}, schema=schema))
    assert sorted(read(unaware).column("v").to_pylist()) == [1.0, 1.0, 2.0, 3.0]
    assert {e.bucket for e in unaware.store.manifest_io().live_entries(unaware.latest_snapshot())} == {0}
    fixed = create_table(catalog, "logb", schema, options={"bucket": "3", "bucket-key": "id"})
    write(fixed, pa.table({"id": list(range(30)), "dt": ["a"] * 30, "v": [0.5] * 30}, schema=schema))
    entries = fixed.store.manifest_io().live_entries(fixed.latest_snapshot())
    assert len({e.bucket for e in entries}) == 3 and all(e.total_buckets == 3 for e in entries)
    assert read(fixed).num_rows == 30


def test_batch_reader_and_pandas(orders_table) -> None:
    write(orders_table, orders([1, 2, 3], ["a", "b", "c"], ["1", "2", "3"]))
    rb = orders_table.new_read_builder().with_projection(["id"])
    splits = rb.new_scan().plan().splits()
    reader = rb.new_read().to_arrow_batch_reader(splits)
    assert sorted(reader.read_all().column("id").to_pylist()) == [1, 2, 3]
    assert sorted(rb.new_read().to_pandas(splits)["id"].tolist()) == [1, 2, 3]
    assert rb.with_limit(2).new_read().to_arrow(splits).num_rows == 2


def test_write_pandas(orders_table) -> None:
    write_builder = orders_table.new_batch_write_builder()
    w, c = write_builder.new_write(), write_builder.new_commit()
    w.write_pandas(orders([1, 2], ["a", "a"], ["1", "2"]).to_pandas())
    c.commit(w.prepare_commit())
    assert read(orders_table).num_rows == 2


def test_commit_messages_pickle_and_commit_from_another_writer(orders_table) -> None:
    import pickle

    wb = orders_table.new_batch_write_builder()
    w1, w2 = wb.new_write(), wb.new_write()
    w1.write_arrow(orders([1], ["a"], ["1"]))
    w2.write_arrow(orders([2], ["b"], ["2"]))
    messages = pickle.loads(pickle.dumps(w1.prepare_commit() + w2.prepare_commit()))
    wb.new_commit().commit(messages)
    assert sorted(read(orders_table).column("id").to_pylist()) == [1, 2]


def test_types_round_trip_through_a_table(catalog: Catalog) -> None:
    schema = pa.schema([
        pa.field("k", pa.string(), nullable=False), pa.field("b", pa.bool_()), pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()), pa.field("i32", pa.int32()), pa.field("f", pa.float32()),
        pa.field("d", pa.float64()), pa.field("dec", pa.decimal128(38, 6)), pa.field("bin", pa.binary()),
        pa.field("day", pa.date32()), pa.field("ms", pa.timestamp("ms")), pa.field("ns", pa.timestamp("ns")),
    ])
    t = create_table(catalog, "types", schema, primary_keys=["k"], options={"bucket": "2"})
    data = pa.table({
        "k": ["short", "a-much-longer-key"], "b": [True, None], "i8": [-1, 127], "i16": [300, None],
        "i32": [1, -2], "f": [1.5, None], "d": [2.25, -0.0], "dec": [Decimal("12345678901234567890.123456"), None],
        "bin": [b"\x00\x01", None], "day": [dt.date(2026, 11, 21), None],
        "ms": [dt.datetime(2026, 1, 1, 1, 1, 1, 1000), None], "ns": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns")),
    }, schema=schema)
    write(t, data)
    assert rows(read(t), "k") == rows(data, "k")
    assert [f.type.to_string() for f in t.schema.fields][:3] == ["STRING NOT NULL", "BOOLEAN", "TINYINT"]
