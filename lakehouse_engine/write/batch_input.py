"""A batch given to a write, checked and cast to the table's schema before any row is routed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import SchemaError


def conform_to_schema(data: pa.Table, expected: pa.Schema, table_name: str) -> pa.Table:
    """`data` with the table's columns, in order and with the table's types; SchemaError otherwise."""
    names = data.column_names
    missing = [n for n in expected.names if n not in names]
    extra = [n for n in names if n not in expected.names]
    if missing or extra:
        raise SchemaError(
            f"batch does not match the schema of table {table_name}: "
            f"missing columns {missing}, unexpected columns {extra}")
    columns = []
    for f in expected:
        col = data.column(f.name)
        if col.type != f.type:
            col = _cast_column(col, f, table_name)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=expected)


def _cast_column(col: pa.ChunkedArray, f: pa.Field, table_name: str) -> pa.ChunkedArray:
    src, dst = col.type, f.type
    if pa.types.is_dictionary(src):
        src = src.value_type
    ok = (
        src == dst
        or (pa.types.is_large_string(src) and pa.types.is_string(dst))
        or ((pa.types.is_large_binary(src) or pa.types.is_fixed_size_binary(src)) and pa.types.is_binary(dst))
        or (pa.types.is_integer(src) and pa.types.is_integer(dst))
        or (pa.types.is_decimal(src) and pa.types.is_decimal(dst))
        or (pa.types.is_timestamp(src) and pa.types.is_timestamp(dst) and src.tz == dst.tz)
        or (pa.types.is_floating(src) and pa.types.is_floating(dst))
        or (pa.types.is_null(src) and f.nullable)
        or _same_nested_kind(src, dst)  # element types are checked by the cast below
    )
    if not ok:
        raise SchemaError(f"column '{f.name}' of the batch has type {col.type}, but table "
                          f"{table_name} stores it as {dst}")
    try:
        return pc.cast(col, dst, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"column '{f.name}' cannot be stored as {dst} in table {table_name}: {e}") from None


def _same_nested_kind(src: pa.DataType, dst: pa.DataType) -> bool:
    """Both lists, both maps or both structs with the same field names, at every depth (ARRAY,
    MAP, ROW); leaf types are then checked by the cast. Arrow's struct cast would fill a missing
    field with nulls and drop an extra one, so field names must match exactly."""
    def is_list(t: pa.DataType) -> bool:
        return bool(pa.types.is_list(t) or pa.types.is_large_list(t))

    if is_list(src) and is_list(dst):
        return _same_shape(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return _same_shape(src.key_type, dst.key_type) and _same_shape(src.item_type, dst.item_type)
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        names = [src.field(i).name for i in range(src.num_fields)]
        if names != [dst.field(i).name for i in range(dst.num_fields)]:
            return False
        return all(_same_shape(src.field(i).type, dst.field(i).type) for i in range(src.num_fields))
    return False


def _same_shape(src: pa.DataType, dst: pa.DataType) -> bool:
    if pa.types.is_nested(src) or pa.types.is_nested(dst):
        return _same_nested_kind(src, dst)
    return True
