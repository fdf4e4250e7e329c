"""`lakehouse changes` shows a range's changes with row kinds; `consumers`, `reset-consumer` and
`clear-consumers` list and set streaming readers' positions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.cli.app import main
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code = main(["--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_changes_lists_each_change_with_its_snapshot_and_kind(catalog: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"), (2, "b", "+I"))
    put(t, (1, "a2", "+U"), (2, "b", "-D"))
    root = str(tmp_path / "warehouse")
    doc = _json(capsys, "changes", root, "db.t", "--from", "1")
    assert doc["columns"] == ["_snapshot_id", "_row_kind", "id", "v", "k"]
    assert sorted((r["_snapshot_id"], r["_row_kind"], r["id"]) for r in doc["rows"]) == [(2, "+U", 1), (2, "-D", 2)]
    merged = _json(capsys, "changes", root, "db.t", "--from", "0", "--merged", "--columns", "id,v")
    assert merged["rows"] == [{"_row_kind": "+U", "id": 1, "v": "a2"}]
    diff = _json(capsys, "changes", root, "db.t", "--from", "1", "--mode", "diff")
    assert sorted((r["_row_kind"], r["id"]) for r in diff["rows"]) == [("+U", 1), ("-D", 2)]
    assert main(["changes", root, "db.t", "--from", "2", "--to", "1"]) == 2
    assert "before --from" in capsys.readouterr().err
    assert main(["changes", root, "db.t", "--from", "0"]) == 0
    assert "4 changes in snapshots (0, 2]" in capsys.readouterr().out


def test_consumers_are_listed_reset_and_cleared(catalog: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    root = str(tmp_path / "warehouse")
    assert _json(capsys, "consumers", root, "db.t")["consumers"] == []
    _json(capsys, "reset-consumer", root, "db.t", "--consumer-id", "etl", "--next-snapshot", "1")
    _json(capsys, "reset-consumer", root, "db.t", "--consumer-id", "bi", "--next-snapshot", "2")
    assert _json(capsys, "consumers", root, "db.t")["consumers"] == [
        {"consumer_id": "bi", "next_snapshot": 2}, {"consumer_id": "etl", "next_snapshot": 1}]
    _json(capsys, "reset-consumer", root, "db.t", "--consumer-id", "bi")
    assert t.consumer_manager().consumers() == {"etl": 1}
    assert _json(capsys, "clear-consumers", root, "db.t", "--including-consumers", "e.*")["deleted"] == ["etl"]
    assert t.consumer_manager().consumers() == {}
    assert main(["reset-consumer", root, "db.t", "--consumer-id", "../x", "--next-snapshot", "1"]) == 1
    assert "consumer id" in capsys.readouterr().err


def test_a_consumer_past_the_next_commit_or_a_bad_pattern_is_named(catalog: Catalog, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    t = keyed_table(catalog)
    put(t, (1, "a", "+I"))
    root = str(tmp_path / "warehouse")
    # Before: accepted, and a stream with the consumer skipped every commit up to snapshot 9.
    assert main(["reset-consumer", root, "db.t", "--consumer-id", "etl", "--next-snapshot", "9"]) != 0
    assert "--next-snapshot 9 is after the snapshot db.t commits next (2)" in capsys.readouterr().err
    assert t.consumer_manager().consumers() == {}
    _json(capsys, "reset-consumer", root, "db.t", "--consumer-id", "etl", "--next-snapshot", "2")
    # Before: "unexpected error: missing ), ...".
    assert main(["clear-consumers", root, "db.t", "--including-consumers", "("]) != 0
    err = capsys.readouterr().err
    assert "is not a regular expression" in err and "unexpected" not in err
    assert t.consumer_manager().consumers() == {"etl": 2}
