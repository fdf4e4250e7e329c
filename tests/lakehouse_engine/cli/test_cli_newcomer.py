"""What a newcomer meets first on the command line: help for a bare `lakehouse`, errors that name
the subcommand, `buckets` naming the snapshot it read, and a `--partitions` filter that matches
nothing failing loudly instead of reporting "nothing to do"."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse_engine.cli.app import main
from tests.lakehouse_engine.cli.test_cli import D1, Run, assert_one_line_error, make_warehouse


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> str:
    """db.orders with three snapshots (partitions dt=2026-11-01 and dt=2026-11-02); not changed."""
    warehouse, _ = make_warehouse(tmp_path_factory.mktemp("newcomer"))
    return warehouse


def run(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    code = main(list(args))
    out, err = capsys.readouterr()
    return Run(code, out, err)


def test_a_bare_lakehouse_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys)
    assert result.code == 0 and result.stderr == ""
    assert result.stdout.startswith("usage: lakehouse")
    assert "buckets" in result.stdout and "expire-snapshots" in result.stdout


@pytest.mark.parametrize(("args", "prefix"), [
    (["read"], "lakehouse read: error: the following arguments are required: WAREHOUSE, TABLE"),
    (["buckets", "{wh}", "db.orders", "--snapshot", "x"], "lakehouse buckets: error: argument --snapshot"),
    (["compact", "{wh}", "db.orders", "--partitions", "region=eu"], "lakehouse compact: error: --partitions"),
])
def test_subcommand_errors_name_the_subcommand(shared: str, args: list[str], prefix: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, *[a.format(wh=shared) for a in args])
    assert result.code == 2
    assert result.stderr.startswith(prefix), result.stderr


def test_buckets_json_reports_the_latest_snapshot_it_read(shared: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = run(capsys, "buckets", shared, "db.orders", "--json").json()
    assert doc["snapshot_id"] == 3
    assert sum(b["record_count"] for b in doc["buckets"]) == 5


def test_buckets_json_reports_the_snapshot_asked_for(shared: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = run(capsys, "buckets", shared, "db.orders", "--snapshot", "1", "--json").json()
    assert doc["snapshot_id"] == 1
    assert sum(b["record_count"] for b in doc["buckets"]) == 3


def test_buckets_text_names_the_snapshot_as_files_does(shared: str, capsys: pytest.CaptureFixture[str]) -> None:
    files = run(capsys, "files", shared, "db.orders").lines()
    buckets = run(capsys, "buckets", shared, "db.orders").lines()
    assert files[-1].endswith("in snapshot 3")
    assert buckets[-1] == "3 buckets, 5 rows in files in snapshot 3"


@pytest.mark.parametrize("command", [["compact", "--full"], ["rescale", "--bucket-num", "3"]])
def test_partitions_matching_nothing_exit_1_and_change_nothing(
        tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, table = make_warehouse(tmp_path / "warehouse")
    before = table.snapshot_manager().list_snapshot_ids()
    result = run(capsys, command[0], warehouse, "db.orders", *command[1:],
                 "--partitions", "dt=2026-12-31;dt=" + D1)
    assert_one_line_error(result, 1, f"lakehouse {command[0]}: error: --partitions dt=2026-12-31 matches "
                                     "no partition of table db.orders",
                          "its partitions are dt=2026-11-01, dt=2026-11-02",
                          f"lakehouse buckets {warehouse} db.orders")
    assert table.snapshot_manager().list_snapshot_ids() == before
