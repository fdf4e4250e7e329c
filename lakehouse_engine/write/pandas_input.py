"""pandas DataFrames into Arrow for a table write, with a SchemaError naming the column when an
object column mixes value types (Arrow would raise its own error, or quietly pick one type)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse_engine.errors import SchemaError


def _value_types(series: Any) -> list[str]:
    """The distinct Python types of a column's non-null values, in order of appearance.

    A loop per value, run only to explain a column that failed to convert: never on the write path.
    """
    seen: dict[str, None] = {}
    for value in series.dropna().tolist():
        seen.setdefault(type(value).__name__, None)
    return list(seen)


def _mixed_columns(df: Any, names: list[str]) -> dict[str, list[str]]:
    """The object columns among `names` whose values have more than one Python type."""
    mixed = {}
    for name in names:
        if name in df.columns and df[name].dtype == object:
            types = _value_types(df[name])
            if len(types) > 1:
                mixed[name] = types
    return mixed


def _mixed_error(mixed: dict[str, list[str]], expected: pa.Schema, table_name: str) -> SchemaError:
    parts = []
    for name, types in mixed.items():
        stored = f" (table {table_name} stores it as {expected.field(name).type})" if name in expected.names else ""
        parts.append(f"column '{name}' mixes values of types {', '.join(types)}{stored}")
    return SchemaError(f"pandas DataFrame written to table {table_name}: {'; '.join(parts)}; "
                       f"convert each column to one type (e.g. df[col].astype(str)) before writing")


def arrow_from_pandas(df: Any, expected: pa.Schema, table_name: str) -> pa.Table:
    """An Arrow table of `df` (index dropped); SchemaError naming the columns whose values mix types."""
    try:
        data = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        mixed = _mixed_columns(df, [str(c) for c in df.columns])
        if mixed:
            raise _mixed_error(mixed, expected, table_name) from None
        raise SchemaError(f"pandas DataFrame cannot be written to table {table_name}: {e}") from None
    # Arrow reads str mixed with bytes as binary without complaint; a string column must not.
    suspect = [f.name for f in data.schema
               if pa.types.is_binary(f.type) and f.name in expected.names
               and pa.types.is_string(expected.field(f.name).type)]
    mixed = _mixed_columns(df, suspect)
    if mixed:
        raise _mixed_error(mixed, expected, table_name)
    return data
