"""ORC timestamps before and after 1970, with and without fractions, at every precision we write:
Paimon 0.9 reads every value we write into an ORC file exactly, and a value it could not read
(before 1970 with a part below a millisecond) is refused naming the column, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, UnsupportedError
from tests.java.conftest import Judge, canonical_rows, ok, sorted_values
from tests.lakehouse_engine.conftest import create_table, read, write

NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
# (precision, Arrow unit, time zone): every timestamp precision maps to one of these units.
PRECISIONS = [(0, "s", None), (3, "ms", None), (6, "us", None), (9, "ns", None),
              (3, "ms", "UTC"), (6, "us", "UTC")]
SECONDS = [-30 * 365 * 86_400, -86_400, -2, -1, 0, 1, 86_400, 1_700_000_000]
FRACTIONS_NS = [0, 1, 999, 1_000, 999_999, 1_000_000, 500_000_000, 999_000_000, 999_999_000, 999_999_999]


def _values(unit: str) -> list[int]:
    """Every second of SECONDS plus every fraction the unit can hold, in the unit."""
    per = NANOS_PER_UNIT[unit]
    return sorted({(s * 1_000_000_000 + f) // per for s in SECONDS for f in FRACTIONS_NS if f % per == 0})


def _paimon_reads(unit: str, value: int) -> bool:
    """Whether Paimon 0.9 can read `value` from an ORC file: not before 1970 with a sub-millisecond part."""
    per_milli = NANOS_PER_UNIT["ms"] // NANOS_PER_UNIT[unit] if unit in ("us", "ns") else 1
    return value >= 0 or value % per_milli == 0


def _schema(unit: str, tz: str | None) -> pa.Schema:
    return pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp(unit, tz))])


def _table(unit: str, tz: str | None, values: list[int]) -> pa.Table:
    return pa.table({"id": list(range(len(values))), "ts": pa.array(values, pa.timestamp(unit, tz))},
                    schema=_schema(unit, tz))


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> dict[str, tuple[pa.Table, dict[str, object]]]:
    warehouse = tmp_path_factory.mktemp("orc_ts")
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    tables, requests = {}, []
    for precision, unit, tz in PRECISIONS:
        name = f"p{precision}_{'ltz' if tz else 'ts'}"
        data = _table(unit, tz, [v for v in _values(unit) if _paimon_reads(unit, v)])
        table = create_table(catalog, name, _schema(unit, tz), ["id"], options={"bucket": "1", "file.format": "orc"})
        write(table, data)
        tables[name] = data
        requests.append({"op": "read", "warehouse": str(warehouse), "table": f"db.{name}"})
    answers = judge(requests)
    return {name: (data, {**answer, "ours": read(catalog.get_table(f"db.{name}"))})
            for (name, data), answer in zip(tables.items(), answers, strict=True)}


@pytest.mark.parametrize("case", [f"p{p}_{'ltz' if tz else 'ts'}" for p, _, tz in PRECISIONS])
def test_paimon_reads_every_orc_timestamp_we_write_exactly(written: dict[str, tuple[pa.Table, dict[str, object]]],
                                                          case: str) -> None:
    data, answer = written[case]
    values = data.column("ts").cast(pa.int64()).to_pylist()
    per_second = NANOS_PER_UNIT["s"] // NANOS_PER_UNIT[data.schema.field("ts").type.unit]
    fractions = [v for v in values if v % per_second]
    assert min(values) < 0 < max(values) and len(values) >= len(SECONDS)
    assert case.startswith("p0") or min(fractions) < 0 < max(fractions)  # fractions either side of 1970
    assert sorted_values(ok(answer)["rows"]) == sorted_values(canonical_rows(data))  # type: ignore[arg-type]
    assert read_rows(answer["ours"]) == read_rows(data)  # type: ignore[arg-type]


def read_rows(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table.column("id").to_pylist(),
                      table.column("ts").cast(pa.int64()).to_pylist(), strict=True))


@pytest.mark.parametrize(("unit", "tz"), [("us", None), ("ns", None), ("us", "UTC")])
@pytest.mark.parametrize("value_ns", [-1_000, -999_999_000, -1_000_001_000, -86_400 * 10**9 - 250_001_000])
def test_a_value_paimon_cannot_read_from_orc_is_refused_naming_the_column(
        tmp_path: Path, unit: str, tz: str | None, value_ns: int) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    table = create_table(catalog, "t", _schema(unit, tz), ["id"], options={"bucket": "1", "file.format": "orc"})
    data = _table(unit, tz, [0, value_ns // NANOS_PER_UNIT[unit]])
    with pytest.raises(UnsupportedError, match="column 'ts' holds .*before 1970 .*below a millisecond"):
        write(table, data)
    assert table.latest_snapshot() is None
    assert not list(Path(table.path).glob("bucket-*/*.orc"))


def test_the_same_values_go_into_parquet_and_avro(tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    for fmt in ("parquet", "avro"):
        table = create_table(catalog, fmt, _schema("us", None), ["id"], options={"bucket": "1", "file.format": fmt})
        write(table, _table("us", None, [-1, -999_999]))
        assert read_rows(read(table)) == [(0, -1), (1, -999_999)]
