"""Branches between us and Paimon 0.9 (Java): it reads our branches (`t$branch_b`) and main after
our fast-forward; we read branches it created, wrote and fast-forwarded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.java.conftest import Judge, canonical_rows, ok, sorted_values
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def _ours(table: Any) -> list[list[Any]]:
    return sorted_values(canonical_rows(read(table)))


def _model(state: dict[int, int]) -> list[list[Any]]:
    return sorted([k, v] for k, v in state.items())


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("branches_java")) / "warehouse"
    Catalog(str(path)).create_database("db")
    return path


def test_paimon_reads_our_branches_and_main_after_our_fast_forward(warehouse: Path, judge: Judge) -> None:
    catalog = Catalog(str(warehouse))
    wh = str(warehouse)
    for name in ("ours", "forwarded"):
        table = create_table(catalog, name, SCHEMA, primary_keys=["id"], options={"bucket": 2})
        write(table, _rows([1, 2, 3], 1))
        table.create_tag("t1", 1)
        write(table, _rows([1], 2))
        table.create_branch("b", "t1")
        branch = catalog.get_table(f"db.{name}$branch_b")
        write(branch, _rows([3, 4], 7))
        branch.compact(full=True)
        write(branch, _rows([5], 5))
    catalog.fast_forward("db.forwarded", "b")
    branch_state = {1: 1, 2: 1, 3: 7, 4: 7, 5: 5}
    answers = [ok(a) for a in judge([
        {"op": "read", "warehouse": wh, "table": "db.ours$branch_b"},
        {"op": "read", "warehouse": wh, "table": "db.ours"},
        {"op": "read", "warehouse": wh, "table": "db.forwarded"},
        # Paimon writes into our branch, then reads it and main again
        {"op": "write", "warehouse": wh, "table": "db.ours$branch_b", "rows": canonical_rows(_rows([6], 6))},
        {"op": "read", "warehouse": wh, "table": "db.ours$branch_b"},
        {"op": "write", "warehouse": wh, "table": "db.forwarded", "rows": canonical_rows(_rows([1], 9))},
    ])]
    assert sorted_values(answers[0]["rows"]) == _model(branch_state)
    assert sorted_values(answers[1]["rows"]) == _model({1: 2, 2: 1, 3: 1})
    assert sorted_values(answers[2]["rows"]) == _model(branch_state)
    assert sorted_values(answers[4]["rows"]) == _model({**branch_state, 6: 6})
    assert _ours(catalog.get_table("db.ours$branch_b")) == _model({**branch_state, 6: 6})
    assert _ours(catalog.get_table("db.ours")) == _model({1: 2, 2: 1, 3: 1})
    assert _ours(catalog.get_table("db.forwarded")) == _model({**branch_state, 1: 9})


def test_we_read_branches_paimon_created_wrote_and_fast_forwarded(warehouse: Path, judge: Judge) -> None:
    catalog = Catalog(str(warehouse))
    wh = str(warehouse)
    create_table(catalog, "theirs", SCHEMA, primary_keys=["id"], options={"bucket": 2})

    def w(table: str, ids: list[int], v: int) -> dict[str, Any]:
        return {"op": "write", "warehouse": wh, "table": table, "rows": canonical_rows(_rows(ids, v))}

    for answer in judge([
        w("db.theirs", [1, 2, 3], 1), w("db.theirs", [1], 2),
        {"op": "create-tag", "warehouse": wh, "table": "db.theirs", "tag": "t1", "snapshot": 1},
        {"op": "create-branch", "warehouse": wh, "table": "db.theirs", "branch": "jb", "tag": "t1"},
        {"op": "create-branch", "warehouse": wh, "table": "db.theirs", "branch": "empty"},
        w("db.theirs$branch_jb", [3, 4], 8), w("db.theirs$branch_empty", [7], 7),
    ]):
        ok(answer)
    theirs = catalog.get_table("db.theirs")
    assert theirs.list_branches() == ["empty", "jb"]
    assert _ours(catalog.get_table("db.theirs$branch_jb")) == _model({1: 1, 2: 1, 3: 8, 4: 8})
    assert _ours(catalog.get_table("db.theirs$branch_empty")) == _model({7: 7})
    assert _ours(theirs) == _model({1: 2, 2: 1, 3: 1})
    # We write on their branch; Paimon fast-forwards main to it; we read and write main.
    write(catalog.get_table("db.theirs$branch_jb"), _rows([5], 5))
    ok(judge([{"op": "fast-forward", "warehouse": wh, "table": "db.theirs", "branch": "jb"}])[0])
    main = catalog.get_table("db.theirs")
    assert _ours(main) == _model({1: 1, 2: 1, 3: 8, 4: 8, 5: 5})
    write(main, _rows([2], 3))
    assert _ours(catalog.get_table("db.theirs")) == _model({1: 1, 2: 3, 3: 8, 4: 8, 5: 5})
    answer = ok(judge([{"op": "read", "warehouse": wh, "table": "db.theirs"}])[0])
    assert sorted_values(answer["rows"]) == _model({1: 1, 2: 3, 3: 8, 4: 8, 5: 5})
