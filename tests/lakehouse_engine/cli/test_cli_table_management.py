"""Table management verbs: partitions, drop-partition, rename-table, rename-tag, replace-tag,
rollback-to-timestamp; each run in-process on a small warehouse, failures change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine.catalog import Catalog
from lakehouse_engine.cli.app import main
from tests.lakehouse_engine.cli.test_cli import D1, D2, Run, assert_one_line_error, make_warehouse
from tests.lakehouse_engine.conftest import snapshot_files


def run(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    code = main(list(args))
    out, err = capsys.readouterr()
    return Run(code, out, err)


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    return run(capsys, args[0], "--json", *args[1:]).json()


def test_partitions_and_drop_partition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, table = make_warehouse(tmp_path)
    listed = ok(capsys, "partitions", root, "db.orders")["partitions"]
    assert [(p["spec"], p["record_count"], p["file_count"]) for p in listed] == [
        ({"dt": D1}, 3, 2), ({"dt": D2}, 2, 2)]
    assert all(p["file_size_in_bytes"] > 0 and p["last_update"] for p in listed)
    human = run(capsys, "partitions", root, "db.orders")
    assert f"dt={D1}" in human.stdout and human.code == 0

    before = snapshot_files(table)
    failed = run(capsys, "drop-partition", root, "db.orders", "--partitions", "dt=2026-12-31")
    assert_one_line_error(failed, 1, "matches no partition")
    assert snapshot_files(table) == before

    dropped = ok(capsys, "drop-partition", root, "db.orders", "--partitions", f"dt={D1}")
    assert dropped["snapshot_ids"] == [4]
    assert [p["spec"] for p in ok(capsys, "partitions", root, "db.orders")["partitions"]] == [{"dt": D2}]


def test_rename_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = make_warehouse(tmp_path)
    assert ok(capsys, "rename-table", root, "db.orders", "db.orders_v2")["target"] == "db.orders_v2"
    assert Catalog(root).list_tables("db") == ["events", "orders_v2"]
    failed = run(capsys, "rename-table", root, "db.events", "db.orders_v2")
    assert_one_line_error(failed, 1, "already exists")
    assert Catalog(root).list_tables("db") == ["events", "orders_v2"]


def test_rename_and_replace_tag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, table = make_warehouse(tmp_path)
    ok(capsys, "create-tag", root, "db.orders", "--tag", "t1", "--snapshot", "1", "--time-retained", "1 d")
    assert ok(capsys, "rename-tag", root, "db.orders", "--tag", "t1", "--target-tag", "first")["target_tag"] == "first"
    replaced = ok(capsys, "replace-tag", root, "db.orders", "--tag", "first", "--snapshot", "2")
    assert (replaced["previous_snapshot_id"], replaced["snapshot_id"]) == (1, 2)
    assert table.list_tags() == ["first"]
    before = snapshot_files(table)
    assert_one_line_error(run(capsys, "rename-tag", root, "db.orders", "--tag", "nope", "--target-tag", "x"),
                          1, "'nope'", "doesn't exist")
    assert_one_line_error(run(capsys, "replace-tag", root, "db.orders", "--tag", "first", "--snapshot", "9"),
                          1, "snapshot 9")
    assert snapshot_files(table) == before


def test_rollback_to_timestamp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, table = make_warehouse(tmp_path)
    second = table.snapshot(2).time_millis
    result = ok(capsys, "rollback-to-timestamp", root, "db.orders", "--timestamp", str(second))
    assert result["snapshot_id"] == 2 and table.latest_snapshot().id == 2
    before = snapshot_files(table)
    failed = run(capsys, "rollback-to-timestamp", root, "db.orders", "--timestamp", "1000")
    assert_one_line_error(failed, 1, "no retained snapshot")
    assert snapshot_files(table) == before
    assert json.loads(json.dumps(result))  # plain JSON
