"""`wap.publish` when main moved after the audit branch was made: the batch is rebased onto main's
latest, re-checked there and published (main's commits kept, the batch once); a failed re-check or
a refused rebase publishes nothing. Engine writes only, no Spark (test_wap.py drives it through
Dagster and Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import CommitConflictError, FileStoreTable
from pipelines.lib import revenue, wap
from pipelines.lib.events import EVENT_SCHEMA, PRIMARY_KEY
from pipelines.lib.resources import LakehouseResource
from pipelines.lib.table_checks import recheck_rebased
from tests.lakehouse_engine.conftest import write
from tests.pipelines.conftest import engine_write, events

RUN = "run-1"
BRANCH = wap.audit_branch_name(RUN)


def _keys(table: FileStoreTable) -> pa.Table:
    rows = revenue.read_all(table)
    return rows.select(list(PRIMARY_KEY)).sort_by([(k, "ascending") for k in PRIMARY_KEY])


@pytest.fixture
def moved(tmp_path: Path) -> tuple[LakehouseResource, list[int], pa.Table]:
    """Main with a first load, an audit branch holding a second load, and a full compaction that
    landed on main after the branch was made; the rows main plus the batch hold."""
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=2)
    rows = events(rows_per_day=300)
    for part in (rows.slice(0, 75), rows.slice(75, 75)):  # two sorted runs: the full compaction has work
        engine_write(lakehouse, part)
    main = lakehouse.get_table()
    branch = wap.open_audit_branch(main, RUN)
    write(branch, rows.slice(150).select(EVENT_SCHEMA.names))
    expected = _keys(branch)
    compactions = main.compact(full=True)
    assert compactions
    return lakehouse, compactions, expected


def test_publish_rebases_onto_the_commit_main_gained_and_publishes_the_batch_once(
        moved: tuple[LakehouseResource, list[int], pa.Table]) -> None:
    lakehouse, compactions, expected = moved
    main = lakehouse.get_table()
    done = wap.publish(main, BRANCH, recheck=recheck_rebased)

    main = lakehouse.get_table()
    assert done.rebased_from == BRANCH and done.branch == f"{BRANCH}-onto-{compactions[-1]}"
    assert done.main_before == compactions[-1] and f"{compactions[-1]} COMPACT" in done.main_commits_kept
    assert main.snapshot(compactions[-1]).commit_kind == "COMPACT"       # kept
    after = [s.commit_kind for s in main.snapshots() if s.id > compactions[-1]]
    assert after.count("APPEND") == 1 and main.latest_snapshot().id == done.main_after  # type: ignore[union-attr]
    assert _keys(main).equals(expected)
    assert wap.audit_branches(main) == [] and main.list_tags() == []


def test_publish_without_recheck_refuses_when_main_moved(
        moved: tuple[LakehouseResource, list[int], pa.Table]) -> None:
    lakehouse, compactions, _ = moved
    main = lakehouse.get_table()
    with pytest.raises(wap.MainMovedError, match="moved after audit branch"):
        wap.publish(main, BRANCH)
    assert lakehouse.get_table().latest_snapshot().id == compactions[-1]  # type: ignore[union-attr]
    assert wap.audit_branches(main) == [BRANCH]


def test_a_failed_recheck_publishes_nothing_and_keeps_both_branches(
        moved: tuple[LakehouseResource, list[int], pa.Table]) -> None:
    lakehouse, compactions, _ = moved
    main = lakehouse.get_table()

    def failing(main: FileStoreTable, rebased: FileStoreTable, audited: FileStoreTable) -> list[str]:
        return recheck_rebased(main, rebased, audited) + ["no_duplicate_primary_key: 1 primary keys appear more than once"]

    with pytest.raises(wap.RecheckFailedError, match="no_duplicate_primary_key"):
        wap.publish(main, BRANCH, recheck=failing)
    main = lakehouse.get_table()
    assert main.latest_snapshot().id == compactions[-1]  # type: ignore[union-attr]
    assert wap.audit_branches(main) == [BRANCH, f"{BRANCH}-onto-{compactions[-1]}"]
    # A later run clears both: they belong to the same (finished) run.
    assert wap.discard_finished(main, lambda run_id: False) == [BRANCH, f"{BRANCH}-onto-{compactions[-1]}"]
    assert main.list_tags() == []


def test_a_refused_rebase_publishes_nothing_and_drops_the_rebased_branch(
        moved: tuple[LakehouseResource, list[int], pa.Table], monkeypatch: pytest.MonkeyPatch) -> None:
    lakehouse, compactions, _ = moved

    def refuse(self: Any, source_branch: str, after: int) -> list[int]:
        raise CommitConflictError("a file of another schema")

    monkeypatch.setattr(FileStoreTable, "rebase_appends", refuse)
    main = lakehouse.get_table()
    with pytest.raises(wap.MainMovedError, match="cannot be rebased onto snapshot"):
        wap.publish(main, BRANCH, recheck=recheck_rebased)
    main = lakehouse.get_table()
    assert main.latest_snapshot().id == compactions[-1]  # type: ignore[union-attr]
    assert wap.audit_branches(main) == [BRANCH]
    assert main.list_tags() == [wap.base_tag_name(BRANCH)]


def test_the_recheck_finds_a_batch_whose_keys_differ_from_the_audited_one(
        moved: tuple[LakehouseResource, list[int], pa.Table]) -> None:
    lakehouse, _, _ = moved
    main = lakehouse.get_table()
    rebased = wap.rebase(main, BRANCH)
    assert recheck_rebased(main, main.branch_table(rebased), main.branch_table(BRANCH)) == []
    extra = events(rows_per_day=20, seed=99).select(EVENT_SCHEMA.names)
    write(main.branch_table(rebased), extra)              # keys the audit never saw
    failed = recheck_rebased(main, main.branch_table(rebased), main.branch_table(BRANCH))
    assert [f.split(":")[0] for f in failed] == ["contract_keys_on_branch"]
