"""`wap.publish` when main was rolled back below the audit branch's point (which deletes main's
base tag) and perhaps written again up to its id: the batch is the branch's own commits, never the
rolled-back snapshot the branch started from, and a snapshot main made again is never dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, FileStoreTable
from pipelines.lib import wap
from tests.lakehouse_engine.conftest import create_table, read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
BRANCH = wap.audit_branch_name("run-1")


def _commit(table: FileStoreTable, ids: list[int], identifier: int, user: str = "daily_revenue") -> None:
    """One stream commit of `ids` (daily_revenue commits every run under one commit user)."""
    builder = table.new_stream_write_builder().with_commit_user(user)
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.table({"id": ids, "v": ids}, schema=SCHEMA))
    commit.commit(write.prepare_commit(identifier), identifier)


def _ids(table: FileStoreTable) -> list[int]:
    return sorted(r["id"] for r in read(table).to_pylist())


@pytest.fixture
def rolled_back(tmp_path: Path) -> Any:
    """Main at 1 after a rollback of snapshot 2 (id 2), the audit branch made at 2 holding id 3."""
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    _commit(t, [1], 1)
    _commit(t, [2], 2)
    _commit(wap.open_audit_branch(t, "run-1"), [3], 3)
    t.rollback_to(1)
    assert wap.base_tag_name(BRANCH) not in t.list_tags()
    return t


def test_a_rebase_after_a_rollback_of_main_does_not_bring_the_rolled_back_rows_back(rolled_back: Any) -> None:
    # Before: main's base tag was gone, the branch point read as 0, and the rebase wrote the
    # branch's copy of snapshot 2 again: id 2, rolled back on purpose, was back in main.
    done = wap.publish(rolled_back, BRANCH, recheck=lambda *tables: [])
    assert _ids(rolled_back) == [1, 3]
    assert done.rebased_from == BRANCH and "rolled back to snapshot 1" in done.main_commits_kept


def test_main_written_again_up_to_the_branch_point_is_not_dropped_by_the_fast_forward(rolled_back: Any) -> None:
    _commit(rolled_back, [9], 9, user="someone-else")  # main's snapshot 2 again, another commit
    assert rolled_back.latest_snapshot().id == wap.branch_base(rolled_back, BRANCH) == 2
    with pytest.raises(wap.MainMovedError, match="made at snapshot 2"):
        wap.publish(rolled_back, BRANCH)
    assert _ids(rolled_back) == [1, 9]
    wap.publish(rolled_back, BRANCH, recheck=lambda *tables: [])
    assert _ids(rolled_back) == [1, 3, 9]
