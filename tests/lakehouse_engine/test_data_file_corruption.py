"""A damaged data file is detected, never read as other rows: single-bit flips over small files of a
primary-key table (several column types, with and without nulls), truncations and growth, and
files of other writers without page checksums still reading."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog, CorruptFileError
from lakehouse_engine.io_warehouse import warehouse_file_io
from lakehouse_engine.mergetree.data_file_reader import read_data_file
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([
    ("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("qty", pa.int32()),
    ("flag", pa.bool_()), ("day", pa.date32()), ("ts", pa.timestamp("us")),
    ("price", pa.decimal128(10, 2)),
])


def _rows(n: int, nulls: bool) -> pa.Table:
    def v(i: int, x: object) -> object:
        return None if nulls and i % 3 == 0 else x
    return pa.table({
        "id": list(range(n)),
        "name": [v(i, f"n{i * 7}") for i in range(n)],
        "amount": [v(i, i * 1.5) for i in range(n)],
        "qty": [v(i, i * 3) for i in range(n)],
        "flag": [v(i, i % 2 == 0) for i in range(n)],
        "day": [v(i, datetime.date(2026, 1, 1) + datetime.timedelta(days=i)) for i in range(n)],
        "ts": [v(i, datetime.datetime(2026, 1, 1, 0, 0, i)) for i in range(n)],
        "price": [v(i, decimal.Decimal(i) / 4) for i in range(n)],
    }, schema=SCHEMA)


def _one_file_table(catalog: Catalog, nulls: bool) -> tuple[FileStoreTable, Path]:
    table = create_table(catalog, f"flips_{nulls}", SCHEMA, primary_keys=["id"], options={"bucket": 1})
    write(table, _rows(20, nulls))
    entry = table.store.manifest_io().live_entries(table.latest_snapshot())[0]
    return table, next(Path(table.path).rglob(entry.file.file_name))


def _flip_outcomes(table: FileStoreTable, path: Path,
                   flips: Iterable[tuple[int, int]]) -> dict[str, list[tuple[int, int]]]:
    """Read the table with each single-bit flip of its data file; tally what each read gave."""
    raw = path.read_bytes()
    good = read(table).sort_by("id")
    outcomes: dict[str, list[tuple[int, int]]] = {"exact": [], "named": [], "wrong": [], "unclear": []}
    for byte, bit in flips:
        damaged = bytearray(raw)
        damaged[byte] ^= 1 << bit
        path.write_bytes(bytes(damaged))
        try:
            got = read(table).sort_by("id")
        except CorruptFileError as exc:
            outcomes["named" if path.name in str(exc) else "unclear"].append((byte, bit))
            continue
        except Exception:  # anything else is an unclear error
            outcomes["unclear"].append((byte, bit))
            continue
        outcomes["exact" if got.equals(good) else "wrong"].append((byte, bit))
    path.write_bytes(raw)
    return outcomes


def _dense_flips(size: int, footer_from: int) -> list[tuple[int, int]]:
    """Three bits of every footer byte (where checksums do not reach), one of every other byte."""
    return [(byte, bit) for byte in range(size) for bit in range(8)
            if (bit - byte) % 8 in ((0, 3, 5) if byte >= footer_from else (0,))]


def _footer_start(raw: bytes) -> int:
    return len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")


@pytest.mark.parametrize("nulls", [False, True], ids=["no-nulls", "nulls"])
def test_a_single_bit_flip_in_a_data_file_reads_exactly_or_raises_naming_it(
        catalog: Catalog, nulls: bool) -> None:
    table, path = _one_file_table(catalog, nulls)
    raw = path.read_bytes()
    outcomes = _flip_outcomes(table, path, _dense_flips(len(raw), _footer_start(raw)))
    assert outcomes["wrong"] == [] and outcomes["unclear"] == []
    assert len(outcomes["named"]) > 2000


@pytest.mark.slow
@pytest.mark.parametrize("nulls", [False, True], ids=["no-nulls", "nulls"])
def test_every_single_bit_flip_in_a_data_file_reads_exactly_or_raises_naming_it(
        catalog: Catalog, nulls: bool) -> None:
    table, path = _one_file_table(catalog, nulls)
    size = path.stat().st_size
    outcomes = _flip_outcomes(table, path, [(b, i) for b in range(size) for i in range(8)])
    assert outcomes["wrong"] == [] and outcomes["unclear"] == []


def test_a_flip_in_page_data_fails_its_checksum(catalog: Catalog) -> None:
    table, path = _one_file_table(catalog, nulls=False)
    raw = bytearray(path.read_bytes())
    # The string column's values are stored plain (no compression would hide them under zstd
    # frames; search for one): flip a bit inside one of them.
    at = raw.find(b"n133")
    assert at > 0
    raw[at + 1] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match=rf"{path.name}.*(CRC|checksum)"):
        read(table)


@pytest.mark.parametrize("damage", ["cut", "grown"])
def test_a_data_file_of_another_size_than_recorded_raises_naming_it(catalog: Catalog,
                                                                    damage: str) -> None:
    table, path = _one_file_table(catalog, nulls=False)
    raw = path.read_bytes()
    # Growth keeps a valid footer at the end: parquet alone would read it.
    path.write_bytes(raw[:-1] if damage == "cut" else b"\x00" * 16 + raw)
    with pytest.raises(CorruptFileError, match=path.name):
        read(table)


def test_files_without_page_checksums_still_read(tmp_path: Path) -> None:
    rows = _rows(20, nulls=True)
    # Another writer's encoding choices (large strings) and pyarrow's defaults: no page checksums.
    theirs = rows.cast(SCHEMA.set(1, pa.field("name", pa.large_string())))
    path = tmp_path / "data-other-writer-0.parquet"
    pq.write_table(theirs, path)
    got = read_data_file(warehouse_file_io(str(tmp_path))[0], str(path), schema=SCHEMA)
    assert got.equals(rows)


def test_a_column_of_another_type_than_the_schema_raises_naming_it(tmp_path: Path) -> None:
    rows = _rows(20, nulls=False)
    path = tmp_path / "data-wrong-type-0.parquet"
    # What a flipped scale in the footer reads as: the same digits, another DECIMAL.
    pq.write_table(rows.cast(SCHEMA.set(7, pa.field("price", pa.decimal128(10, 4)))), path)
    with pytest.raises(CorruptFileError, match="data-wrong-type-0.parquet.*'price'"):
        read_data_file(warehouse_file_io(str(tmp_path))[0], str(path), schema=SCHEMA)
