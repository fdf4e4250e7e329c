"""pypaimon 2.1.0 and this engine agree on the snapshot lifecycle: pypaimon reads our tables after
our expiry and rollback, reads by our tags, and writes on top of a rolled-back table; we read by
pypaimon's tags and after pypaimon's rollback. One pypaimon subprocess does all its work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.maintenance.helpers import (
    expected_files,
    files_on_disk,
    keyed_table,
    now_ms,
    state,
    upsert,
)

PYPAIMON_LIFECYCLE = """
import pyarrow as pa
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})

def rows(table):
    rb = table.new_read_builder()
    out = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted([r["id"], r["v"]] for r in out.to_pylist()) if out is not None else []

results = {}
for name, table_name, options in ARGS["reads"]:
    try:
        t = catalog.get_table("db." + table_name)
        results[name] = rows(t.copy(options) if options else t)
    except Exception as e:
        results[name] = "ERROR " + repr(e)

# pypaimon writes on top of a table we rolled back to an expired tag.
t = catalog.get_table("db.restored")
wb = t.new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])
w.write_arrow(pa.table({"id": [77], "dt": ["2026-11-02"], "v": [77]}, schema=schema))
c.commit(w.prepare_commit())
w.close(); c.close()

# pypaimon's own tag and rollback on one of our tables.
t = catalog.get_table("db.theirs")
t.create_tag("py-tag", 3)
t.rollback_to(4)
results["tags of theirs"] = sorted(t.list_tags())
emit(results)
"""


def history(table: FileStoreTable, n: int) -> dict[int, dict[int, int]]:
    states = {}
    for i in range(n):
        upsert(table, [i, i + 1, 100 + i % 3], i)
        states[table.latest_snapshot().id] = state(table)
        if i == 3:
            table.compact(full=True)
            states[table.latest_snapshot().id] = state(table)
    return states


def pairs(s: dict[int, int]) -> list[list[int]]:
    return sorted([k, v] for k, v in s.items())


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory: pytest.TempPathFactory, pypaimon: Callable[..., Any]) -> dict[str, Any]:
    warehouse = tmp_path_factory.mktemp("lifecycle") / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    options = {"write-only": "true"}
    expected: dict[str, Any] = {}

    expired = keyed_table(catalog, "expired", options)
    states = history(expired, 8)
    expired.create_tag("v2", 2)
    expired.expire_snapshots(retain_max=2)
    earliest = expired.snapshot_manager().earliest_snapshot_id()
    expected["after expiry"] = pairs(states[max(states)])
    expected["expired, by our tag"] = pairs(states[2])
    expected["expired, earliest retained"] = pairs(state(expired, earliest))

    rolled = keyed_table(catalog, "rolled", options)
    states = history(rolled, 7)
    rolled.rollback_to(4)
    expected["after rollback"] = pairs(states[4])

    restored = keyed_table(catalog, "restored", options)
    states = history(restored, 7)
    restored.create_tag("v1", 1)
    restored.expire_snapshots(retain_max=2)
    restored.rollback_to("v1")
    expected["after rollback to an expired tag"] = pairs(states[1])
    expected["restored, by our tag"] = pairs(states[1])

    theirs = keyed_table(catalog, "theirs", options)
    theirs_states = history(theirs, 6)

    reads = [["after expiry", "expired", {}],
             ["expired, by our tag", "expired", {"scan.tag-name": "v2"}],
             ["expired, earliest retained", "expired", {"scan.snapshot-id": str(earliest)}],
             ["after rollback", "rolled", {}],
             ["after rollback to an expired tag", "restored", {}],
             ["restored, by our tag", "restored", {"scan.tag-name": "v1"}]]
    results = pypaimon(PYPAIMON_LIFECYCLE, warehouse=str(warehouse), reads=reads)
    clear_manifest_cache()
    return {"results": results, "expected": expected, "catalog": catalog,
            "restored_state": states[1], "theirs_states": theirs_states}


@pytest.mark.parametrize("name", ["after expiry", "expired, by our tag", "expired, earliest retained",
                                  "after rollback", "after rollback to an expired tag",
                                  "restored, by our tag"])
def test_pypaimon_reads_what_we_read(lifecycle: dict[str, Any], name: str) -> None:
    assert lifecycle["results"][name] == lifecycle["expected"][name]


def test_pypaimon_writes_on_top_of_a_table_we_rolled_back(lifecycle: dict[str, Any]) -> None:
    table = lifecycle["catalog"].get_table("db.restored")
    assert state(table) == {**lifecycle["restored_state"], 77: 77}
    assert table.snapshot_manager().list_snapshot_ids() == [1, 2]


def test_we_read_by_pypaimon_tags_and_after_pypaimon_rollback(lifecycle: dict[str, Any]) -> None:
    table = lifecycle["catalog"].get_table("db.theirs")
    states = lifecycle["theirs_states"]
    assert lifecycle["results"]["tags of theirs"] == ["py-tag"]
    assert state(table, tag="py-tag") == states[3]
    assert state(table) == states[4]
    assert table.snapshot_manager().list_snapshot_ids() == [1, 2, 3, 4]
    # pypaimon's rollback leaves the removed snapshots' files behind; orphan removal takes them.
    assert table.remove_orphan_files(older_than=now_ms())
    assert files_on_disk(table) == expected_files(table)
    assert state(table) == states[4]


def test_our_tag_file_is_what_pypaimon_writes(lifecycle: dict[str, Any]) -> None:
    catalog: Catalog = lifecycle["catalog"]
    theirs = Path(catalog.get_table("db.theirs").path_factory.tag_dir, "tag-py-tag").read_text()
    ours = Path(catalog.get_table("db.expired").path_factory.tag_dir, "tag-v2").read_text()
    import json

    assert set(json.loads(theirs)) <= set(json.loads(ours)) | {"logOffsets"}
