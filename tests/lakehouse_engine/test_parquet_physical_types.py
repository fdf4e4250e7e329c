"""Data files use the parquet physical types Paimon's own writer uses, and files of the old layout still read.

Paimon writes DECIMAL with precision <= 9 as INT32, <= 18 as INT64 and larger as
FIXED_LEN_BYTE_ARRAY, and TIMESTAMP with precision > 6 as INT96; Paimon 0.9 cannot read a
dictionary-encoded FIXED_LEN_BYTE_ARRAY DECIMAL(<=18) nor an INT64-nanosecond TIMESTAMP(7..9).
"""

from __future__ import annotations

import decimal
import glob
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.mergetree import data_file
from tests.lakehouse_engine.conftest import create_table, read, rows, write

D = decimal.Decimal
SCHEMA = pa.schema([
    pa.field("k", pa.int64(), nullable=False),
    pa.field("d9", pa.decimal128(9, 2)), pa.field("d18", pa.decimal128(18, 4)),
    pa.field("d38", pa.decimal128(38, 6)), pa.field("t9", pa.timestamp("ns")),
    pa.field("tz9", pa.timestamp("ns", tz="UTC")),
])


def _batch(keys: range) -> pa.Table:
    n = len(keys)
    return pa.table({
        "k": list(keys),
        # a low-cardinality price column: the writer dictionary-encodes it
        "d9": [None if k % 3 == 0 else D("-1234567.89") if k % 3 == 1 else D("0.05") for k in keys],
        "d18": [D("99999999999999.9999")] * n,
        "d38": [D("-12345678901234567890123456789012.123456")] * n,
        "t9": pa.array([1_700_000_000_123_456_789 + k for k in keys], pa.timestamp("ns")),
        "tz9": pa.array([-1 - k for k in keys], pa.timestamp("ns", tz="UTC")),
    }, schema=SCHEMA)


def _physical_types(table_dir: Path) -> dict[str, str]:
    files = glob.glob(str(table_dir / "bucket-*" / "*.parquet"))
    assert files
    schema = pq.ParquetFile(files[0]).schema
    return {schema.column(i).name: schema.column(i).physical_type for i in range(len(schema))}


def test_decimals_and_nanosecond_timestamps_use_paimons_physical_types(catalog: Catalog, tmp_path: Path) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["k"], options={"bucket": "1"})
    write(table, _batch(range(10)))
    types = _physical_types(tmp_path / "warehouse" / "db.db" / "t")
    assert {c: types[c] for c in ("d9", "d18", "d38", "t9", "tz9")} == {
        "d9": "INT32", "d18": "INT64", "d38": "FIXED_LEN_BYTE_ARRAY", "t9": "INT96", "tz9": "INT96"}
    assert rows(read(table), "k") == rows(_batch(range(10)), "k")


def test_microsecond_timestamps_stay_int64_without_a_nanosecond_column(catalog: Catalog, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("t6", pa.timestamp("us")),
                        pa.field("t3", pa.timestamp("ms"))])
    table = create_table(catalog, "t", schema, primary_keys=["k"], options={"bucket": "1"})
    data = pa.table({"k": [1, 2], "t6": pa.array([1, -2], pa.timestamp("us")),
                     "t3": pa.array([3, 4], pa.timestamp("ms"))}, schema=schema)
    write(table, data)
    types = _physical_types(tmp_path / "warehouse" / "db.db" / "t")
    assert (types["t6"], types["t3"]) == ("INT64", "INT64")
    assert rows(read(table), "k") == rows(data, "k")


def test_a_file_mixing_microsecond_and_nanosecond_timestamps_stays_int64(catalog: Catalog,
                                                                         tmp_path: Path) -> None:
    # INT96 would read back as nanoseconds: the year 3000 in TIMESTAMP(6) would overflow
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("t6", pa.timestamp("us")),
                        pa.field("t9", pa.timestamp("ns"))])
    table = create_table(catalog, "t", schema, primary_keys=["k"], options={"bucket": "1"})
    data = pa.table({"k": [1], "t6": pa.array([32_503_680_000_000_000], pa.timestamp("us")),
                     "t9": pa.array([5], pa.timestamp("ns"))}, schema=schema)
    write(table, data)
    types = _physical_types(tmp_path / "warehouse" / "db.db" / "t")
    assert (types["t6"], types["t9"]) == ("INT64", "INT64")
    assert rows(read(table), "k") == rows(data, "k")


def test_files_of_the_old_layout_read_and_compact_with_new_ones(catalog: Catalog,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["k"], options={"bucket": "1"})
    with monkeypatch.context() as m:  # the writer before: FIXED_LEN_BYTE_ARRAY decimals, INT64 nanos
        m.setattr(data_file, "paimon_parquet_types", lambda schema: {})
        write(table, _batch(range(0, 10)))
    write(table, _batch(range(5, 15)))
    expected = rows(_batch(range(0, 15)), "k")
    assert rows(read(table), "k") == expected
    table.compact(full=True)
    assert rows(read(table), "k") == expected
