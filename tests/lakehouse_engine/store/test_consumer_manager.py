"""Consumers: the files, the manager's calls, a streaming read that resumes from one, and snapshot
expiry that keeps what a consumer has not read."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import CorruptFileError, InvalidOptionError
from lakehouse_engine.store.consumer_manager import Consumer
from tests.lakehouse_engine.read.changes_helpers import changes, keyed_table, put


def test_consumer_file_is_paimons_json_and_the_manager_lists_resets_and_deletes(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    cm = t.consumer_manager()
    assert cm.consumer("a") is None and cm.consumers() == {} and cm.min_next_snapshot() is None
    cm.reset_consumer("a", Consumer(3))
    cm.reset_consumer("b", 5)
    assert Path(t.path, "consumer", "consumer-a").read_text() == '{"nextSnapshot": 3}'
    assert cm.list_all_ids() == ["a", "b"] and cm.consumers() == {"a": 3, "b": 5}
    assert cm.min_next_snapshot() == 3
    cm.delete_consumer("a")
    assert cm.consumers() == {"b": 5}
    assert cm.clear_consumers("b.*") == ["b"] and cm.consumers() == {}


def test_bad_consumer_ids_and_files_are_named(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    cm = t.consumer_manager()
    for bad in ("", "..", "a/b", "a\\b"):
        with pytest.raises(InvalidOptionError):
            cm.reset_consumer(bad, 1)
    with pytest.raises(InvalidOptionError, match="next snapshot 0"):
        cm.reset_consumer("a", 0)
    os.makedirs(Path(t.path, "consumer"), exist_ok=True)
    Path(t.path, "consumer", "consumer-x").write_text("nonsense")
    with pytest.raises(CorruptFileError, match="consumer-x"):
        cm.consumer("x")
    # Our extra field is checked as strictly as Paimon's: a damaged time is named, not compared.
    for text in ('{"nextSnapshot": 3, "lastSnapshotTimeMillis": "12"}',
                 '{"nextSnapshot": 3, "lastSnapshotTimeMillis": true}',
                 '{"nextSnapshot": 1, "lastSnapshotTimeMillis": 12}'):
        Path(t.path, "consumer", "consumer-x").write_text(text)
        with pytest.raises(CorruptFileError, match="consumer-x.*lastSnapshotTimeMillis"):
            cm.consumer("x")
    # Fields we do not know (a later Paimon's) are ignored, as Paimon's Consumer ignores them.
    Path(t.path, "consumer", "consumer-x").write_text('{"nextSnapshot": 3, "other": 1}')
    assert cm.consumer("x") == Consumer(3)


def test_expire_removes_consumers_untouched_since_the_cutoff(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    cm = t.consumer_manager()
    cm.reset_consumer("old", 1)
    cm.reset_consumer("new", 1)
    past = time.time() - 3600
    os.utime(Path(t.path, "consumer", "consumer-old"), (past, past))
    assert cm.expire(int((time.time() - 60) * 1000)) == ["old"]
    assert cm.list_all_ids() == ["new"]


def test_consumer_expiration_time_applies_at_commit(catalog: Catalog) -> None:
    t = keyed_table(catalog, **{"consumer.expiration-time": "1 min"})
    put(t, (1, "a", "+I"))
    t.consumer_manager().reset_consumer("old", 1)
    past = time.time() - 3600
    os.utime(Path(t.path, "consumer", "consumer-old"), (past, past))
    put(t, (2, "b", "+I"))
    assert t.consumer_manager().list_all_ids() == []


def test_a_stream_resumes_from_its_consumer_after_the_plan_before_was_processed(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    builder = t.new_stream_read_builder().with_consumer_id("job").with_include_row_kind().with_poll_interval_ms(5)
    stream = builder.new_streaming_scan().stream_sync()
    next(stream)  # the full first read of snapshot 1
    assert t.consumer_manager().consumer("job") is None  # not processed yet: nothing recorded
    put(t, (2, "b", "+I"))
    next(stream)  # asking for the next plan records the one before as processed
    # (with the commit time of snapshot 1 as read: a restart checks it was not rewritten)
    assert t.consumer_manager().consumer("job") == Consumer(2, t.snapshot(1).time_millis)
    stream.close()
    put(t, (3, "c", "+I"))
    again = t.new_stream_read_builder().with_consumer_id("job").with_include_row_kind()
    scan = again.new_streaming_scan()
    plan = scan.plan()  # resumes at snapshot 2: its changes were never recorded as processed
    assert plan.snapshot_id == 2
    assert changes(again.new_read().to_arrow(plan.splits())) == [("+I", 2, "b")]
    assert scan.plan().snapshot_id == 3


def test_ignore_progress_starts_as_the_scan_mode_says(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    put(t, (2, "b", "+I"))
    t.consumer_manager().reset_consumer("job", 2)
    table = t.copy({"consumer-id": "job", "consumer.ignore-progress": "true"})
    plan = table.new_stream_read_builder().new_streaming_scan().plan()
    assert plan.snapshot_id == 2 and sum(s.row_count for s in plan.splits()) == 2  # a full read


def test_snapshot_expiry_keeps_what_a_consumer_has_not_read(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    for i in range(6):
        put(t, (i, "v", "+I"))
    t.consumer_manager().reset_consumer("slow", 3)
    t.expire_snapshots(retain_max=1)
    assert [s.id for s in t.snapshots()] == [3, 4, 5, 6]
    scan = t.new_stream_read_builder().with_consumer_id("slow").with_include_row_kind()
    plan = scan.new_streaming_scan().plan()
    assert changes(scan.new_read().to_arrow(plan.splits())) == [("+I", 2, "v")]
    t.consumer_manager().delete_consumer("slow")
    t.expire_snapshots(retain_max=1)
    assert [s.id for s in t.snapshots()] == [6]


def test_a_consumer_id_that_listing_would_skip_or_no_file_system_takes_is_refused(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    for i in range(3):
        put(t, (i, "a", "+I"))
    cm = t.consumer_manager()
    # The temporary name of an atomic write: listing skips it, so expiry did not see the consumer
    # and removed the snapshots it still had to read.
    with pytest.raises(InvalidOptionError, match="temporary file"):
        cm.reset_consumer("etl.0123456789abcdef0123456789abcdef.tmp", 1)
    with pytest.raises(InvalidOptionError, match="temporary file"):
        t.new_stream_read_builder().with_consumer_id("x.0123456789abcdef0123456789abcdef.tmp")
    with pytest.raises(InvalidOptionError, match="more than 255"):
        cm.reset_consumer("x" * 240, 1)
    with pytest.raises(InvalidOptionError, match="control characters"):
        cm.reset_consumer("a\x7f", 1)
    assert not Path(t.path, "consumer").exists() or cm.list_all_ids() == []
    # Spaces, colons and non-ASCII letters name files like any other character.
    for odd in ("a b", "a:b", "é-1", "consumer-x"):
        cm.reset_consumer(odd, 2)
    assert cm.consumers() == {"a b": 2, "a:b": 2, "consumer-x": 2, "é-1": 2}
    t.expire_snapshots(retain_max=1, retain_min=1)
    assert t.snapshot_manager().earliest_snapshot_id() == 2
