"""Where a read starts when `scan.mode` is `default`, as Paimon's CoreOptions.startupMode resolves
it: `incremental-between` or `incremental-between-timestamp` make it `incremental`, a batch mode,
which a streaming read refuses naming the options (Paimon: "Cannot read incremental in streaming
mode"), while a batch read reads the range."""

from __future__ import annotations

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.store.scan_start import startup_mode
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


@pytest.mark.parametrize("options", [{"incremental-between": "1,2"},
                                     {"incremental-between-timestamp": "0,99999999999999"},
                                     {"scan.mode": "incremental", "incremental-between": "1,2"}])
def test_an_incremental_range_is_a_batch_read_a_stream_refuses(catalog: Catalog, options: dict[str, str]) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    put(t, (2, "b", "+I"))
    table = t.copy(options)
    assert startup_mode(table.store) == "incremental"
    with pytest.raises(InvalidOptionError, match="incremental-between"):
        table.new_stream_read_builder().new_streaming_scan().plan()
    rb = table.new_read_builder()
    assert {r["id"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()} >= {2}


def test_other_defaults_resolve_as_paimons(catalog: Catalog) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    assert startup_mode(t.store) == "latest-full"
    assert startup_mode(t.copy({"scan.snapshot-id": "1"}).store) == "from-snapshot"
    assert startup_mode(t.copy({"scan.timestamp-millis": "1"}).store) == "from-timestamp"
    assert startup_mode(t.copy({"scan.mode": "full"}).store) == "latest-full"
    # An explicit mode with another mode's options is refused, as Paimon's SchemaValidation
    # refuses it (test_startup_option_conflicts.py).
    with pytest.raises(InvalidOptionError, match="'incremental-between' must not be set with scan.mode 'latest'"):
        t.copy({"scan.mode": "latest", "incremental-between": "0,1"})


def test_from_snapshot_full_of_a_snapshot_kept_only_as_a_changelog_starts_at_the_earliest_snapshot(
        catalog: Catalog) -> None:
    # A full read needs the snapshot itself: Paimon's ContinuousFromSnapshotFullStartingScanner
    # reads max(scan.snapshot-id, earliest snapshot). With changelog retention snapshot 2 is still
    # "readable" as a long-lived changelog, and the stream waited for it forever, empty.
    t = keyed_table(catalog, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
                                "changelog.num-retained.max": "20"})
    for i in range(6):
        put(t, (i, f"v{i}", "+I"))
    sm = t.snapshot_manager()
    assert sm.earliest_snapshot_id() == 5 and sm.long_lived_changelog_exists(2)
    builder = t.copy({"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"}).new_stream_read_builder()
    scan, read = builder.new_streaming_scan(), builder.new_read()
    first = scan.plan()
    assert first.snapshot_id == 5
    assert sorted(r["id"] for r in read.to_arrow(first.splits()).to_pylist()) == [0, 1, 2, 3, 4]
    assert scan.plan().snapshot_id == 6
