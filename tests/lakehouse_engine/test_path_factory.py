"""Partition directory names are Paimon's (legacy names, escaped), as pypaimon 2.1.0 writes them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from lakehouse_engine.path_factory import (
    escape_path_name,
    format_partition_value,
    partition_path_component,
)
from lakehouse_engine.types import DataType

DEFAULT = "__DEFAULT_PARTITION__"


@pytest.mark.parametrize("value, type_string, expected", [
    (dt.date(2026, 11, 21), "DATE", "20778"),
    (dt.datetime(2026, 1, 2, 3, 4), "TIMESTAMP(3)", "2026-01-02T03:04"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, 6000), "TIMESTAMP(3)", "2026-01-02T03:04:05.006"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, 123456), "TIMESTAMP(6)", "2026-01-02T03:04:05.123456"),
    (7, "INT", "7"),
    (True, "BOOLEAN", "true"),
    (Decimal("1.50"), "DECIMAL(10, 2)", "1.50"),
    (" ", "STRING", DEFAULT),
    (None, "STRING", DEFAULT),
    ("2026-11-21", "STRING", "2026-11-21"),
])
def test_partition_values_format_as_paimon_names_them(value: object, type_string: str, expected: str) -> None:
    assert format_partition_value(value, DataType.parse(type_string), DEFAULT) == expected


def test_escaping_matches_paimon() -> None:
    assert escape_path_name("a/b:c") == "a%2Fb%3Ac"
    assert escape_path_name("x y%") == "x y%25"
    assert partition_path_component("ts", "2026-01-02T03:04") == "ts=2026-01-02T03%3A04"
