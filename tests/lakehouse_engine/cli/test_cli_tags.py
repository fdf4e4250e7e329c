"""Empty or blank tag names are usage errors naming the flag, and change nothing stored."""

from __future__ import annotations

import pytest

from lakehouse_engine.cli.app import main
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.cli.test_cli import Run, assert_one_line_error, make_warehouse
from tests.lakehouse_engine.conftest import snapshot_files


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, FileStoreTable]:
    """One warehouse for every case: each must leave it as it was."""
    return make_warehouse(tmp_path_factory.mktemp("tags"))


@pytest.mark.parametrize("command", [
    ["create-tag", "--tag", ""], ["create-tag", "--tag", "   "], ["create-tag", "--tag", "\t"],
    ["rollback", "--tag", ""], ["rollback", "--tag", " "],
    ["delete-tag", "--tag", ""], ["delete-tag", "--tag", "a, ,b"],
    ["read", "--tag", ""], ["read", "--tag", "  "],
])
def test_an_empty_or_blank_tag_is_a_usage_error_naming_the_flag(
        warehouse: tuple[str, FileStoreTable], command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    root, table = warehouse
    before = snapshot_files(table)
    code = main([command[0], root, "db.orders", *command[1:]])
    out, err = capsys.readouterr()
    assert_one_line_error(Run(code, out, err), 2, "argument --tag", "cannot be empty or blank")
    assert snapshot_files(table) == before
