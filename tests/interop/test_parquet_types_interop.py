"""pypaimon 2.1.0 reads the parquet types Paimon's writer uses and we now write: INT96 nanoseconds
for TIMESTAMP(7..9) (in a file without coarser timestamps) and INT32/INT64 DECIMAL."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts9", pa.timestamp("ns")),
                    pa.field("ltz9", pa.timestamp("ns", tz="UTC")), pa.field("d5", pa.decimal128(5, 2)),
                    pa.field("d18", pa.decimal128(18, 4))])

READ = """
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
rb = cat.get_table("db.t").new_read_builder()
table = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")
emit([[str(v) for v in row.values()] for row in table.to_pylist()])
"""


def test_pypaimon_reads_int96_timestamps_and_integer_decimals(tmp_path: Path,
                                                               pypaimon: Callable[..., Any]) -> None:
    warehouse = tmp_path / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    D = decimal.Decimal
    write(table, pa.table({
        "id": [1, 2, 3],
        "ts9": pa.array([1_700_000_000_123_456_789, -1, None], pa.timestamp("ns")),
        "ltz9": pa.array([5, None, 5], pa.timestamp("ns", tz="UTC")),
        "d5": [D("-999.99"), D("0.01"), D("0.01")], "d18": [D("99999999999999.9999"), None, D("-1.0000")],
    }, schema=SCHEMA))
    assert pypaimon(READ, warehouse=str(warehouse)) == [
        ["1", "2023-11-14 22:13:20.123456789", "1970-01-01 00:00:00.000000005+00:00", "-999.99",
         "99999999999999.9999"],
        ["2", "1969-12-31 23:59:59.999999999", "None", "0.01", "None"],
        ["3", "None", "1970-01-01 00:00:00.000000005+00:00", "0.01", "-1.0000"],
    ]
