"""Data files other writers leave: ORC and Avro files are read by their name's extension, with
the same column selection, casts and CorruptFileError as parquet."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.data_file_reader import read_data_file

# A data file's columns as Paimon lays them out (key, system fields, values).
SCHEMA = pa.schema([
    pa.field("_KEY_id", pa.int64(), nullable=False),
    pa.field("_SEQUENCE_NUMBER", pa.int64(), nullable=False),
    pa.field("_VALUE_KIND", pa.int8(), nullable=False),
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("price", pa.decimal128(10, 2)),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us")),
])
ROWS = pa.table({
    "_KEY_id": [1, 2, 3],
    "_SEQUENCE_NUMBER": [10, 11, 12],
    "_VALUE_KIND": pa.array([0, 2, 3], pa.int8()),
    "id": [1, 2, 3],
    "name": ["a", None, "\u65e5\u672c"],
    "price": [decimal.Decimal("1.25"), None, decimal.Decimal("-99999999.99")],
    "day": [datetime.date(2024, 2, 29), datetime.date(1969, 12, 31), None],
    "at": [datetime.datetime(2026, 11, 21, 12, 0, 0, 123456), None, datetime.datetime(1960, 1, 1)],
}, schema=SCHEMA)
# The Avro schema a pypaimon-style writer uses for these columns (nullable fields as unions).
AVRO_SCHEMA: dict[str, Any] = {"type": "record", "name": "record", "fields": [
    {"name": "_KEY_id", "type": "long"},
    {"name": "_SEQUENCE_NUMBER", "type": "long"},
    {"name": "_VALUE_KIND", "type": "int"},
    {"name": "id", "type": "long"},
    {"name": "name", "type": ["null", "string"]},
    {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
]}


def _write_avro(path: Path) -> None:
    records = []
    for r in ROWS.to_pylist():
        at = r["at"]
        records.append({**r, "at": at.replace(tzinfo=datetime.timezone.utc) if at is not None else None})
    with open(path, "wb") as f:
        fastavro.writer(f, AVRO_SCHEMA, records, codec="deflate")


@pytest.fixture
def file_io() -> FileIO:
    return FileIO(pafs.LocalFileSystem())


@pytest.mark.parametrize("suffix", ["orc", "avro", "parquet"])
def test_each_format_reads_to_the_same_rows(tmp_path: Path, file_io: FileIO, suffix: str) -> None:
    path = tmp_path / f"data-1-0.{suffix}"
    if suffix == "orc":
        orc.write_table(ROWS, str(path))
    elif suffix == "avro":
        _write_avro(path)
    else:
        pq.write_table(ROWS, path)
    assert read_data_file(file_io, str(path), schema=SCHEMA).equals(ROWS)
    columns = ["id", "at", "_VALUE_KIND"]
    picked = read_data_file(file_io, str(path), columns, pa.schema([SCHEMA.field(c) for c in columns]))
    assert picked.column_names == columns
    assert picked.equals(ROWS.select(columns))


@pytest.mark.parametrize("suffix", ["orc", "avro"])
def test_missing_columns_and_corrupt_files_name_the_file(tmp_path: Path, file_io: FileIO, suffix: str) -> None:
    good = tmp_path / f"data-good.{suffix}"
    if suffix == "orc":
        orc.write_table(ROWS, str(good))
    else:
        _write_avro(good)
    with pytest.raises(CorruptFileError, match=rf"data-good\.{suffix} lacks columns \['nope'\]"):
        read_data_file(file_io, str(good), ["id", "nope"])
    bad = tmp_path / f"data-bad.{suffix}"
    bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(CorruptFileError, match=rf"data-bad\.{suffix}"):
        read_data_file(file_io, str(bad))
    with pytest.raises(CorruptFileError, match="missing"):
        read_data_file(file_io, str(tmp_path / f"data-gone.{suffix}"))
