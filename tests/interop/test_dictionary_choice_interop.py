"""pypaimon 2.1.0 reads our parquet files whatever their columns' dictionary choice: our own
(unique columns plain, repeating ones dictionary-encoded) and each `parquet.enable.dictionary`
option."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.mergetree.test_parquet_dictionary import SCHEMA, _data

CASES: dict[str, dict[str, str]] = {
    "ours": {},
    "all": {"parquet.enable.dictionary": "true"},
    "per_column": {"parquet.enable.dictionary": "false", "parquet.enable.dictionary#city": "true"},
}

READ = """
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
rb = cat.get_table(ARGS["table"]).new_read_builder()
table = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")
emit([[str(v) for v in row.values()] for row in table.to_pylist()])
"""


@pytest.mark.parametrize("case", list(CASES))
def test_pypaimon_reads_our_dictionary_choice(tmp_path: Path, pypaimon: Callable[..., Any], case: str) -> None:
    warehouse = tmp_path / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "2", **CASES[case]})
    write(table, _data(6_000))
    write(table, _data(6_000, seed=2).slice(0, 2_000))
    ours = read(table).sort_by("id")
    expected = [[str(v) for v in row.values()] for row in ours.to_pylist()]
    assert pypaimon(READ, warehouse=str(warehouse), table="db.t") == expected
