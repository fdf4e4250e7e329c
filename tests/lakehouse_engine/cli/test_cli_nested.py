"""`lakehouse show` and `lakehouse read` on a table with ARRAY, MAP and ROW columns."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.cli.app import main
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("address", pa.struct([pa.field("city", pa.string())])),
    pa.field("scores", pa.map_(pa.string(), pa.list_(pa.int32()))),
])


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    path = str(tmp_path / "warehouse")
    catalog = Catalog(path)
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    write(table, pa.table({"id": [1, 2], "address": [{"city": "Oslo"}, None],
                           "scores": [[("k", [1, None])], None]}, schema=SCHEMA))
    return path


def test_read_shows_nested_values_and_projects_a_row_field(warehouse: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["read", warehouse, "db.t"]) == 0
    out = capsys.readouterr().out
    assert " 1  {city: Oslo}  {k: [1, NULL]}" in out and " 2  NULL          NULL" in out
    assert main(["--json", "read", warehouse, "db.t", "--columns", "id,address.city"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"] == [{"id": 1, "address_city": "Oslo"}, {"id": 2, "address_city": None}]


def test_show_prints_nested_types(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", warehouse, "db.t"]) == 0
    out = capsys.readouterr().out
    assert "ROW<`city` STRING>" in out and "MAP<STRING NOT NULL, ARRAY<INT>>" in out
