"""Batch incremental reads (`incremental-between`, `-timestamp`, `-scan-mode`) with Paimon's
semantics: the range's changes merged per key, deletes dropped; diff compares two snapshots."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.read.incremental import IncrementalRead, IncrementalScan, incremental_range
from tests.lakehouse_engine.conftest import create_table, write
from tests.lakehouse_engine.read.changes_helpers import changes, keyed_table, put


def _read(table, **options):  # type: ignore[no-untyped-def]
    rb = table.copy(options).new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted((r["id"], r["v"]) for r in rows.to_pylist())


@pytest.fixture
def history(catalog: Catalog):  # type: ignore[no-untyped-def]
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I"))   # 1
    put(t, (1, "a2", "+I"), (2, "b", "-D"))                  # 2
    t.compact(full=True)                                     # 3 COMPACT
    put(t, (4, "d", "+I"), (1, "a3", "+I"))                  # 4
    put(t, (3, "c", "+I"))                                   # 5: rewrites c unchanged
    return t


def test_delta_merges_each_key_over_the_range_and_drops_deletes(history) -> None:  # type: ignore[no-untyped-def]
    assert _read(history, **{"incremental-between": "1,4"}) == [(1, "a3"), (4, "d")]
    assert _read(history, **{"incremental-between": "0,2"}) == [(1, "a2"), (3, "c")]
    assert _read(history, **{"incremental-between": "2,3"}) == []  # a compaction changes no row


def test_diff_compares_the_end_with_the_start(history) -> None:  # type: ignore[no-untyped-def]
    mode = {"incremental-between-scan-mode": "diff"}
    # c was written again unchanged: a diff shows it not, a delta does.
    assert _read(history, **{"incremental-between": "4,5", **mode}) == []
    assert _read(history, **{"incremental-between": "4,5"}) == [(3, "c")]
    assert _read(history, **{"incremental-between": "1,5", **mode}) == [(1, "a3"), (4, "d")]
    scan_range = incremental_range(history.copy({"incremental-between": "1,5", **mode}))
    assert scan_range is not None
    read = IncrementalRead(history, keep_delete=True, include_row_kind=True)
    rows = read.to_arrow(IncrementalScan(history, None, scan_range).plan().splits())
    assert changes(rows) == [("+I", 1, "a3"), ("-D", 2, "b"), ("+I", 4, "d")]


def test_tags_name_a_range_read_as_a_diff(history) -> None:  # type: ignore[no-untyped-def]
    history.create_tag("t1", 1)
    history.create_tag("t4", 4)
    assert _read(history, **{"incremental-between": "t1,t4"}) == [(1, "a3"), (4, "d")]
    assert _read(history, **{"incremental-between": "t1,t4", "incremental-between-scan-mode": "delta"}) \
        == [(1, "a3"), (4, "d")]


def test_timestamps_name_the_snapshots_at_or_before_them(history) -> None:  # type: ignore[no-untyped-def]
    t1, t4 = history.snapshot(1).time_millis, history.snapshot(4).time_millis
    assert _read(history, **{"incremental-between-timestamp": f"{t1},{t4}"}) \
        == _read(history, **{"incremental-between": "1,4"})
    assert _read(history, **{"incremental-between-timestamp": f"{t1 - 10**6},{t1}"}) == [(1, "a"), (2, "b"), (3, "c")]


def test_bad_ranges_are_refused_naming_the_option(history) -> None:  # type: ignore[no-untyped-def]
    for value, match in (("5", "start"), ("4,2", "must not be after"), ("0,9", "outside")):
        with pytest.raises(InvalidOptionError, match=match):
            _read(history, **{"incremental-between": value})
    with pytest.raises(InvalidOptionError, match="incremental-between-scan-mode"):
        history.copy({"incremental-between-scan-mode": "everything"})


def test_a_batch_read_honours_scan_mode_from_timestamp_and_compacted_full(history) -> None:  # type: ignore[no-untyped-def]
    t2 = history.snapshot(2).time_millis
    assert _read(history, **{"scan.mode": "from-timestamp", "scan.timestamp-millis": str(t2)}) \
        == [(1, "a2"), (3, "c")]
    assert _read(history, **{"scan.timestamp-millis": str(t2)}) == [(1, "a2"), (3, "c")]
    assert _read(history, **{"scan.mode": "compacted-full"}) == [(1, "a2"), (3, "c")]  # snapshot 3
    assert _read(history, **{"scan.timestamp-millis": str(history.snapshot(1).time_millis - 10**6)}) == []


def test_diff_pairs_float_keys_as_paimon_orders_them(catalog: Catalog) -> None:
    """-0.0 and 0.0 are two keys and every NaN one key (Java's Double.compare): a diff pairs each
    key of the end with the same key of the start, so keys written again unchanged are no change."""
    schema = pa.schema([pa.field("k", pa.float64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "floats", schema, primary_keys=["k"], options={"bucket": "1"})
    nan = float("nan")
    write(t, pa.table({"k": [0.0, -0.0, nan, 1.0], "v": ["zero", "minus-zero", "nan", "one"]}, schema=schema))  # 1
    write(t, pa.table({"k": [-0.0, 0.0, nan, 1.0], "v": ["minus-zero", "zero", "nan", "uno"]}, schema=schema))  # 2
    rb = t.copy({"incremental-between": "1,2", "incremental-between-scan-mode": "diff"}).new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    assert rows == [{"k": 1.0, "v": "uno"}]


def test_a_range_of_tags_reads_the_tagged_snapshots_after_they_expired(history) -> None:  # type: ignore[no-untyped-def]
    # A tag keeps its snapshot (and files) after expiry: Paimon's IncrementalTagStartingScanner
    # diffs the tags' own snapshots, with no check against the retained snapshot range.
    history.create_tag("t1", 1)
    history.create_tag("t2", 4)
    expected = _read(history, **{"incremental-between": "t1,t2"})
    assert expected == [(1, "a3"), (4, "d")]
    history.expire_snapshots(retain_max=1, retain_min=1)
    assert history.snapshot_manager().earliest_snapshot_id() == 5
    assert _read(history, **{"incremental-between": "t1,t2"}) == expected
    assert _read(history, **{"incremental-between": "t1,t2", "incremental-between-scan-mode": "diff"}) == expected
