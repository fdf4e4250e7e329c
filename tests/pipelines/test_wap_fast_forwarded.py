"""`wap.fast_forwarded`, which a re-execution of a publish that died after its fast-forward asks
before publishing again: main holds the branch's head as the same commit, whether or not main moved
on since (a compaction, another run's publish). Before, it asked whether main's *latest* snapshot
was the branch's head: once main moved, the re-execution rebased the batch and published it a
second time. Engine writes only, no Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import FileStoreTable
from pipelines.lib import revenue, wap
from pipelines.lib.events import EVENT_SCHEMA, PRIMARY_KEY
from pipelines.lib.resources import LakehouseResource
from pipelines.lib.table_checks import recheck_rebased
from tests.lakehouse_engine.conftest import write
from tests.pipelines.conftest import engine_write, events

RUN = "run-1"
BRANCH = wap.audit_branch_name(RUN)


def _appends_of(table: FileStoreTable, user: str) -> int:
    return sum(1 for s in table.snapshots() if s.commit_kind == "APPEND" and s.commit_user == user)


@pytest.fixture
def died_after_fast_forward(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LakehouseResource, str]:
    """Main with a first load; a publish of an audit branch's batch that fast-forwarded main and
    died before dropping the branch; the commit user of the batch."""
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=2)
    rows = events(rows_per_day=300)
    engine_write(lakehouse, rows.slice(0, 100))
    main = lakehouse.get_table()
    branch = wap.open_audit_branch(main, RUN)
    write(branch, rows.slice(100).select(EVENT_SCHEMA.names))
    user = branch.latest_snapshot().commit_user  # type: ignore[union-attr]

    def die(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the process died")

    with monkeypatch.context() as patch:
        patch.setattr(wap, "discard", die)
        with pytest.raises(RuntimeError):
            wap.publish(lakehouse.get_table(), BRANCH, recheck=recheck_rebased)
    assert BRANCH in lakehouse.get_table().list_branches()
    return lakehouse, user


def test_main_at_the_branch_head_was_fast_forwarded(died_after_fast_forward: tuple[LakehouseResource, str]) -> None:
    lakehouse, user = died_after_fast_forward
    main = lakehouse.get_table()
    assert wap.fast_forwarded(main, BRANCH) and _appends_of(main, user) == 1


@pytest.mark.parametrize("moved_by", ["compaction", "another publish"])
def test_main_that_moved_on_past_the_branch_head_was_fast_forwarded_and_is_not_published_again(
        died_after_fast_forward: tuple[LakehouseResource, str], moved_by: str) -> None:
    lakehouse, user = died_after_fast_forward
    main = lakehouse.get_table()
    if moved_by == "compaction":
        assert main.compact(full=True)
    else:
        engine_write(lakehouse, events(rows_per_day=50, seed=9))
    main = lakehouse.get_table()
    assert wap.fast_forwarded(main, BRANCH)  # (before: False, and the re-execution published again)
    if not wap.fast_forwarded(main, BRANCH):
        wap.publish(main, BRANCH, recheck=recheck_rebased)
    assert _appends_of(lakehouse.get_table(), user) == 1


def test_a_branch_main_never_took_was_not_fast_forwarded(tmp_path: Path) -> None:
    lakehouse = LakehouseResource(warehouse=str(tmp_path), bucket=2)
    rows = events(rows_per_day=300)
    engine_write(lakehouse, rows.slice(0, 100))
    main = lakehouse.get_table()
    branch = wap.open_audit_branch(main, RUN)
    write(branch, rows.slice(100).select(EVENT_SCHEMA.names))
    engine_write(lakehouse, rows.slice(0, 10))  # main moved on without it: same ids, other commits
    write(branch, rows.slice(10, 10).select(EVENT_SCHEMA.names))
    assert not wap.fast_forwarded(lakehouse.get_table(), BRANCH)


def test_a_republish_would_have_put_the_batchs_rows_over_newer_ones(
        died_after_fast_forward: tuple[LakehouseResource, str]) -> None:
    """What publishing again did before: another run's publish updated keys of the batch, and the
    rebased batch written again above it turned them back to the batch's older rows."""
    lakehouse, _ = died_after_fast_forward
    main = lakehouse.get_table()
    batch = revenue.read_all(main.branch_table(BRANCH))
    newer = batch.slice(0, 5).set_column(batch.schema.get_field_index("amount"), "amount",
                                         pa.array([10**6] * 5, batch.schema.field("amount").type))
    engine_write(lakehouse, newer.select(EVENT_SCHEMA.names))  # another run's publish on main
    assert wap.fast_forwarded(lakehouse.get_table(), BRANCH)
    wap.discard(lakehouse.get_table(), BRANCH)  # (what the re-execution does then)
    got = revenue.read_all(lakehouse.get_table())
    keys = list(zip(*(got.column(k).to_pylist() for k in PRIMARY_KEY), strict=True))
    amounts = dict(zip(keys, got.column("amount").to_pylist(), strict=True))
    assert all(amounts[key] == 10**6 for key in zip(*(newer.column(k).to_pylist() for k in PRIMARY_KEY), strict=True))


def test_main_that_expired_the_branch_head_cannot_tell_and_publishes_nothing(
        died_after_fast_forward: tuple[LakehouseResource, str]) -> None:
    lakehouse, user = died_after_fast_forward
    for seed in range(3):
        engine_write(lakehouse, events(rows_per_day=20, seed=20 + seed))
    main = lakehouse.get_table()
    main.expire_snapshots(retain_max=1, retain_min=1)
    with pytest.raises(wap.MainMovedError, match="cannot be told"):
        wap.fast_forwarded(lakehouse.get_table(), BRANCH)
    assert BRANCH in lakehouse.get_table().list_branches()
