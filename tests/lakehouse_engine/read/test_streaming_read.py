"""Streaming reads of a table's changes (pypaimon's StreamReadBuilder shape, Paimon's start modes)."""

from __future__ import annotations

import asyncio

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError, SnapshotNotExistError
from tests.lakehouse_engine.read.changes_helpers import changes, keyed_table, put


def _plans(table, n, **options):  # type: ignore[no-untyped-def]
    t = table.copy(options) if options else table
    builder = t.new_stream_read_builder().with_include_row_kind()
    scan, read = builder.new_streaming_scan(), builder.new_read()
    out = []
    for _ in range(n):
        plan = scan.plan()
        out.append((plan.snapshot_id, changes(read.to_arrow(plan.splits()))))
    return out, scan


def test_latest_full_reads_the_table_then_each_snapshots_changes_with_row_kinds(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"), (2, "b", "+I"))
    builder = t.new_stream_read_builder().with_include_row_kind().with_poll_interval_ms(5)
    scan, read = builder.new_streaming_scan(), builder.new_read()
    stream = scan.stream_sync()
    first = next(stream)
    assert first.snapshot_id == 1
    assert changes(read.to_arrow(first.splits())) == [("+I", 1, "a"), ("+I", 2, "b")]
    put(t, (1, "a2", "+U"), (2, "b", "-D"))
    second = next(stream)
    assert second.snapshot_id == 2
    assert changes(read.to_arrow(second.splits())) == [("+U", 1, "a2"), ("-D", 2, "b")]


def test_compaction_snapshots_yield_no_changes_without_a_changelog_producer(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    put(t, (1, "b", "+I"))
    t.compact(full=True)  # snapshot 3: COMPACT
    put(t, (2, "c", "+I"))
    plans, scan = _plans(t, 4, **{"scan.mode": "from-snapshot", "scan.snapshot-id": "2"})
    assert plans == [(2, [("+I", 1, "b")]), (4, [("+I", 2, "c")]), (None, []), (None, [])]
    assert scan.checkpoint() == 5


def test_latest_starts_after_the_latest_snapshot(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    plans, _ = _plans(t, 2, **{"scan.mode": "latest"})
    assert plans == [(None, []), (None, [])]
    scan = t.copy({"scan.mode": "latest"}).new_stream_read_builder().new_streaming_scan()
    scan.plan()
    put(t, (2, "b", "+I"))
    assert scan.plan().snapshot_id == 2


def test_from_snapshot_full_reads_that_snapshot_whole_then_what_follows(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    put(t, (2, "b", "+I"))
    put(t, (1, "c", "+I"))
    plans, _ = _plans(t, 2, **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"})
    assert plans == [(2, [("+I", 1, "a"), ("+I", 2, "b")]), (3, [("+I", 1, "c")])]


def test_from_timestamp_starts_after_the_last_snapshot_at_or_before_it(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    put(t, (2, "b", "+I"))
    millis = t.snapshot(1).time_millis
    plans, _ = _plans(t, 1, **{"scan.mode": "from-timestamp", "scan.timestamp-millis": str(millis)})
    assert plans == [(2, [("+I", 2, "b")])]


def test_compacted_full_starts_from_the_latest_compaction(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    t.compact(full=True)  # 2
    put(t, (2, "b", "+I"))  # 3
    plans, _ = _plans(t, 2, **{"scan.mode": "compacted-full"})
    assert plans == [(2, [("+I", 1, "a")]), (3, [("+I", 2, "b")])]


def test_filter_projection_and_buckets(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, *[(i, f"v{i}", "+I") for i in range(20)])
    b = t.new_stream_read_builder()
    pred = b.new_predicate_builder().less_than("id", 5)
    b = b.with_filter(pred).with_projection(["id"]).with_include_row_kind()
    plan = b.new_streaming_scan().plan()
    rows = b.new_read().to_arrow(plan.splits())
    assert rows.column_names == ["_row_kind", "id"]
    assert sorted(rows.column("id").to_pylist()) == [0, 1, 2, 3, 4]
    one = t.new_stream_read_builder().with_buckets([0])
    plan = one.new_streaming_scan().plan()
    assert {s.bucket for s in plan.splits()} == {0}
    other = t.new_stream_read_builder().with_bucket_filter(lambda b: b == 1)
    ids0 = one.new_read().to_arrow(plan.splits()).column("id").to_pylist()
    p1 = other.new_streaming_scan().plan()
    ids1 = other.new_read().to_arrow(p1.splits()).column("id").to_pylist()
    assert sorted(ids0 + ids1) == list(range(20)) and not set(ids0) & set(ids1)


def test_async_stream_polls_until_a_snapshot_arrives(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    builder = t.new_stream_read_builder().with_poll_interval_ms(5).with_include_row_kind()
    scan, read = builder.new_streaming_scan(), builder.new_read()

    async def run() -> list[tuple[str, int, str | None]]:
        agen = scan.stream()
        waiter = asyncio.ensure_future(agen.__anext__())
        await asyncio.sleep(0.05)
        assert not waiter.done()  # an empty table: nothing yet
        put(t, (7, "x", "+I"))
        plan = await asyncio.wait_for(waiter, 10)
        await agen.aclose()
        return changes(read.to_arrow(plan.splits()))

    assert asyncio.run(run()) == [("+I", 7, "x")]


def test_an_expired_next_snapshot_raises_instead_of_skipping_changes(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    scan = t.copy({"scan.mode": "latest"}).new_stream_read_builder().new_streaming_scan()
    scan.plan()  # next: 2
    for i in range(3):
        put(t, (i, "b", "+I"))
    t.expire_snapshots(retain_max=1)
    with pytest.raises(SnapshotNotExistError, match="has expired"):
        scan.plan()


def test_bad_settings_are_refused(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    with pytest.raises(InvalidOptionError, match="scan.mode"):
        t.copy({"scan.mode": "sideways"})
    with pytest.raises(InvalidOptionError, match="scan.snapshot-id"):
        t.copy({"scan.mode": "from-snapshot"}).new_stream_read_builder().new_streaming_scan().plan()
    with pytest.raises(InvalidOptionError, match="consumer id"):
        t.new_stream_read_builder().with_consumer_id("../x")
    with pytest.raises(InvalidOptionError, match="poll interval"):
        t.new_stream_read_builder().with_poll_interval_ms(-1)


def test_streaming_options_not_applied_are_refused(catalog: Catalog) -> None:
    from lakehouse_engine.errors import UnsupportedError

    t = keyed_table(catalog)
    for key, value in (("streaming-read-overwrite", "true"), ("scan.bounded.watermark", "5")):
        with pytest.raises(UnsupportedError, match=key):
            t.copy({key: value}).new_stream_read_builder().new_streaming_scan()


@pytest.mark.parametrize("producer", ["none", "input"])
def test_a_nested_projection_reads_fields_of_a_row_in_every_plan(catalog: Catalog, producer: str) -> None:
    import pyarrow as pa

    from tests.lakehouse_engine.conftest import create_table, write

    address = pa.struct([pa.field("city", pa.string()),
                         pa.field("geo", pa.struct([pa.field("lat", pa.float64())]))])
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("address", address),
                        pa.field("k", pa.string())])
    t = create_table(catalog, "nested", schema, primary_keys=["id"],
                     options={"bucket": "1", "rowkind.field": "k", "changelog-producer": producer})

    def put_rows(*rows: tuple[int, str | None, float | None, str]) -> None:
        write(t, pa.Table.from_pylist([{"id": i, "address": {"city": c, "geo": {"lat": lat}}, "k": k}
                                       for i, c, lat, k in rows], schema=schema))

    put_rows((1, "Oslo", 59.9, "+I"), (2, "Bergen", None, "+I"))
    builder = (t.new_stream_read_builder().with_include_row_kind()
               .with_projection(["id", "address.city", "address.geo.lat", "address.zip"]))
    assert [f.name for f in builder.read_type()] == ["id", "address_city", "address_geo_lat"]
    scan, read = builder.new_streaming_scan(), builder.new_read()
    first = read.to_arrow(scan.plan().splits())  # latest-full: the table, merged
    put_rows((1, "Trondheim", 63.4, "+U"), (2, None, None, "-D"))
    changes = read.to_arrow(scan.plan().splits())  # the changes of snapshot 2, as stored
    expected_schema = pa.schema([pa.field("_row_kind", pa.string(), nullable=False),
                                 pa.field("id", pa.int64(), nullable=False),
                                 pa.field("address_city", pa.string()),
                                 pa.field("address_geo_lat", pa.float64())])
    assert first.schema == expected_schema and changes.schema == expected_schema
    assert sorted(first.to_pylist(), key=lambda r: r["id"]) == [
        {"_row_kind": "+I", "id": 1, "address_city": "Oslo", "address_geo_lat": 59.9},
        {"_row_kind": "+I", "id": 2, "address_city": "Bergen", "address_geo_lat": None}]
    assert sorted(changes.to_pylist(), key=lambda r: r["id"]) == [
        {"_row_kind": "+U", "id": 1, "address_city": "Trondheim", "address_geo_lat": 63.4},
        {"_row_kind": "-D", "id": 2, "address_city": None, "address_geo_lat": None}]
