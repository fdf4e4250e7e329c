"""`lakehouse alter`: every change kind from the command line; a refused change is one error line
naming the column and writes no schema version."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.cli.app import main
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.cli.test_cli import Run, assert_one_line_error, make_warehouse
from tests.lakehouse_engine.conftest import read


def alter(capsys: pytest.CaptureFixture[str], root: str, *args: str) -> Run:
    code = main(["alter", root, "db.orders", *args])
    out, err = capsys.readouterr()
    return Run(code, out, err)


def test_every_change_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = make_warehouse(tmp_path)
    assert alter(capsys, root, "add-column", "channel", "STRING", "--comment", "where", "--after", "dt").code == 0
    assert alter(capsys, root, "rename-column", "note", "remark").code == 0
    assert alter(capsys, root, "alter-column", "amount", "--type", "DECIMAL(14, 2)", "--comment", "total").code == 0
    assert alter(capsys, root, "drop-column", "remark").code == 0
    assert alter(capsys, root, "set-option", "snapshot.num-retained.min=4").code == 0
    run = alter(capsys, root, "--json", "remove-option", "snapshot.num-retained.min")
    doc = run.json()
    assert doc["schema_id"] == 6 and "snapshot.num-retained.min" not in doc["options"]
    assert [f["name"] for f in doc["fields"]] == ["order_id", "dt", "channel", "amount"]
    assert doc["fields"][3] == {"id": 2, "name": "amount", "type": "DECIMAL(14, 2)", "comment": "total"}
    t = Catalog(root).get_table("db.orders")
    assert read(t).column_names == ["order_id", "dt", "channel", "amount"]
    assert read(t).column("channel").null_count == 4


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, FileStoreTable]:
    """One warehouse for every refused change: each must leave it as it was."""
    return make_warehouse(tmp_path_factory.mktemp("alter"))


@pytest.mark.parametrize("args, code, fragments", [
    (["drop-column", "order_id"], 1, ["'order_id' is part of the primary key"]),
    (["rename-column", "dt", "day"], 1, ["'dt' is a partition key"]),
    (["alter-column", "note", "--type", "INT"], 1, ["cannot be converted to INT"]),
    (["add-column", "x", "INT NOT NULL"], 1, ["must be nullable"]),
    (["add-column", "x", "WIBBLE"], 2, ["WIBBLE"]),
    (["set-option", "bucket=4"], 1, ["rescale"]),
    (["set-option", "merge-engine=first-row"], 1, ["'merge-engine' cannot change"]),
    (["set-option", "novalue"], 2, ["KEY=VALUE"]),
    (["alter-column", "note"], 2, ["--type"]),
    (["drop-column", "nope"], 1, ["'nope' does not exist"]),
])
def test_a_refused_change_is_one_line_and_writes_nothing(
        refusing: tuple[str, FileStoreTable], capsys: pytest.CaptureFixture[str], args: list[str], code: int,
        fragments: list[str]) -> None:
    root, table = refusing
    before = sorted(os.listdir(f"{table.path}/schema"))
    assert_one_line_error(alter(capsys, root, *args), code, *fragments)
    assert sorted(os.listdir(f"{table.path}/schema")) == before


def test_help_lists_the_changes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alter", "--help"]) == 0
    out = capsys.readouterr().out
    for change in ("add-column", "drop-column", "rename-column", "alter-column", "set-option", "remove-option"):
        assert change in out


def test_read_of_an_older_snapshot_takes_its_column_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = make_warehouse(tmp_path)
    assert alter(capsys, root, "rename-column", "note", "remark").code == 0
    code = main(["read", root, "db.orders", "--snapshot", "1", "--columns", "order_id,note", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert sorted(r["note"] or "" for r in json.loads(out)["rows"]) == ["", "a", "c"]
    code = main(["read", root, "db.orders", "--columns", "order_id,remark", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(json.loads(out)["rows"]) == 4
