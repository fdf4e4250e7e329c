"""The commit loop publishes what a kind's planner plans: its changes, index and changelog."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.format.snapshot import CommitKind, Snapshot
from lakehouse_engine.write.commit_planners import AppendPlanner, PlannedChanges
from lakehouse_engine.write.table_commit import TableCommit
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _rows(v: int) -> pa.Table:
    return pa.table({"id": [1, 2, 3], "v": [v] * 3}, schema=SCHEMA)


class _WithChangelog(AppendPlanner):
    """An APPEND planner that also lists its new files as the snapshot's changelog."""

    def plan(self, latest: Snapshot | None) -> PlannedChanges:
        planned = super().plan(latest)
        planned.changelog = list(planned.changes)
        return planned


def test_a_planner_changelog_becomes_the_snapshots_changelog_manifest_list(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": 1})
    write(table, _rows(1))
    real = TableCommit._planner

    def planner(self: TableCommit, kind: CommitKind, entries: list) -> Any:
        chosen = real(self, kind, entries)
        if kind is CommitKind.APPEND:
            chosen = _WithChangelog(chosen.table, chosen.entries, chosen.messages, chosen.resequencer)
        return chosen

    monkeypatch.setattr(TableCommit, "_planner", planner)
    (sid,) = write(table, _rows(2))
    snapshot = table.snapshot(sid)
    mio = table.store.manifest_io()
    delta = mio.read_entries(mio.read_manifest_list(snapshot.delta_manifest_list))
    changelog = mio.read_entries(mio.read_manifest_list(snapshot.changelog_manifest_list))
    assert [e.file.file_name for e in changelog] == [e.file.file_name for e in delta]
    assert snapshot.changelog_record_count == 3 and snapshot.commit_kind == CommitKind.APPEND
    assert table.snapshot(1).changelog_manifest_list is None  # a plain APPEND has none


def test_commit_kinds_are_the_snapshot_json_values() -> None:
    assert [str(k) for k in CommitKind] == ["APPEND", "COMPACT", "OVERWRITE", "ANALYZE"]
    assert f"{CommitKind.COMPACT}" == "COMPACT" and CommitKind("OVERWRITE") is CommitKind.OVERWRITE
