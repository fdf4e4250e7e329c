"""Every data type round-trips between Paimon 0.9's Java writer and us, in both directions.

Paimon writes the rows of `ALL_TYPES` and `NANOS` (from `test_java_reads_ours`) into tables we
created; we read exactly those rows. A table mixing TIMESTAMP(6) and TIMESTAMP(9) columns is
included: Paimon writes it with INT64 and INT96 columns side by side, which we read; Paimon 0.9
cannot read such a table when we write it (pyarrow writes INT96 for all timestamp columns of a
file or for none, and 0.9 reads TIMESTAMP(0..6) only as INT64 and (7..9) only as INT96), which
`test_paimon_09_cannot_read_our_mixed_precision_timestamps` pins down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.java.conftest import Judge, canonical_rows, ok, sorted_values
from tests.java.test_java_reads_ours import ALL_TYPES, NANOS, _all_types, _nanos
from tests.lakehouse_engine.conftest import create_table, read, write

MIXED = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts6", pa.timestamp("us")),
                   pa.field("ts9", pa.timestamp("ns"))])


def _mixed() -> pa.Table:
    return pa.table({"id": [1, 2, 3], "ts6": pa.array([1, None, -5], pa.timestamp("us")),
                     "ts9": pa.array([7, 8, None], pa.timestamp("ns"))}, schema=MIXED)


CASES: dict[str, tuple[pa.Schema, pa.Table]] = {
    "all_types": (ALL_TYPES, _all_types(0)),
    "nanos": (NANOS, _nanos(0)),
    "mixed_timestamps": (MIXED, _mixed()),
}


@pytest.fixture(scope="module")
def round_trips(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> dict[str, Any]:
    """Per case: what we read of Paimon's table; plus Paimon's answer for our mixed table."""
    warehouse = Path(tmp_path_factory.mktemp("java_types")) / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    requests = []
    for name, (schema, data) in CASES.items():
        create_table(catalog, name, schema, primary_keys=["id"], options={"bucket": "2"})
        requests.append({"op": "write", "warehouse": str(warehouse), "table": f"db.{name}",
                         "rows": canonical_rows(data)})
    ours_mixed = create_table(catalog, "ours_mixed", MIXED, primary_keys=["id"], options={"bucket": "1"})
    write(ours_mixed, _mixed())
    requests.append({"op": "read", "warehouse": str(warehouse), "table": "db.ours_mixed"})
    answers = judge(requests)
    out: dict[str, Any] = {"paimon reads our mixed table": answers[-1]}
    for name, answer in zip(CASES, answers[:-1], strict=True):
        ok(answer)
        out[name] = read(catalog.get_table(f"db.{name}"))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_we_read_every_type_paimon_writes(round_trips: dict[str, Any], case: str) -> None:
    schema, data = CASES[case]
    ours = round_trips[case]
    # BINARY(n) reads as variable-length binary (Arrow has no fixed-width type per Paimon length)
    assert [(f.name, f.type) for f in ours.schema if f.name != "bin5"] == \
        [(f.name, f.type) for f in schema if f.name != "bin5"]
    assert sorted_values(canonical_rows(ours)) == sorted_values(canonical_rows(data))


def test_paimon_09_cannot_read_our_mixed_precision_timestamps(round_trips: dict[str, Any]) -> None:
    # Known limitation (docs/compatibility.md): such files stay INT64, which 0.9 rejects for ts9.
    answer = round_trips["paimon reads our mixed table"]
    assert "Unexpected type: INT64" in answer.get("error", ""), answer
