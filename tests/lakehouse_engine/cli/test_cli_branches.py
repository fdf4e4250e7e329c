"""`lakehouse branches`, `create-branch`, `delete-branch`, `rename-branch`, `fast-forward` and
`--branch` on the table commands."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.cli.test_cli import lakehouse
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def test_branch_commands_and_the_branch_option(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": 1})
    write(table, _rows([1, 2], 1))
    assert lakehouse("create-tag", wh, "db.t", "--tag", "t1").code == 0
    assert lakehouse("create-branch", wh, "db.t", "audit", "--tag", "t1").lines() == [
        "created branch audit of db.t from tag t1"]
    write(catalog.get_table("db.t$branch_audit"), _rows([3], 3))
    listed = lakehouse("--json", "branches", wh, "db.t").json()
    assert listed["branches"] == [{"branch": "audit", "latest_snapshot_id": 2, "schema_id": 0, "tags": 1}]
    by_option = lakehouse("--json", "read", wh, "db.t", "--branch", "audit").json()
    by_name = lakehouse("--json", "read", wh, "db.t$branch_audit").json()
    assert by_option == by_name and sorted(r["id"] for r in by_option["rows"]) == [1, 2, 3]
    assert lakehouse("--json", "snapshots", wh, "db.t", "--branch", "audit").json()
    assert lakehouse("fast-forward", wh, "db.t", "audit").code == 0
    main = lakehouse("--json", "read", wh, "db.t").json()
    assert sorted(r["id"] for r in main["rows"]) == [1, 2, 3]
    assert lakehouse("rename-branch", wh, "db.t", "audit", "done").code == 0
    assert lakehouse("delete-branch", wh, "db.t", "done").code == 0
    gone = lakehouse("read", wh, "db.t", "--branch", "done")
    assert gone.code == 1 and "branch 'done'" in gone.stderr and len(gone.stderr.strip().splitlines()) == 1
    assert lakehouse("branches", wh, "db.t").lines() == ["table db.t has no branches"]
