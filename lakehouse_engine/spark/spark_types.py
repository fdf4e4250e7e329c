"""Paimon types as Spark types: the schema a Spark read of a table has."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from pyspark.sql.types import DataType as SparkType

from lakehouse_engine import types as t
from lakehouse_engine.errors import UnsupportedError
from lakehouse_engine.table import FileStoreTable

_SPARK_TYPES: dict[str, SparkType] = {
    t.BOOLEAN: BooleanType(), t.TINYINT: ByteType(), t.SMALLINT: ShortType(), t.INT: IntegerType(),
    t.BIGINT: LongType(), t.FLOAT: FloatType(), t.DOUBLE: DoubleType(), t.DATE: DateType(),
    t.TIMESTAMP: TimestampNTZType(), t.TIMESTAMP_LTZ: TimestampType(),
}


def spark_type(dtype: t.DataType, column: str) -> SparkType:
    """The Spark type a column of this Paimon type is read as (TIMESTAMP is TIMESTAMP_NTZ)."""
    if dtype.is_string:
        return StringType()
    if dtype.is_binary:
        return BinaryType()
    if dtype.is_decimal:
        return DecimalType(dtype.precision or 10, dtype.scale or 0)
    if dtype.root == t.ARRAY and dtype.element is not None:
        return ArrayType(spark_type(dtype.element, column), dtype.element.nullable)
    if dtype.root == t.MAP and dtype.key is not None and dtype.value is not None:
        return MapType(spark_type(dtype.key, column), spark_type(dtype.value, column), dtype.value.nullable)
    if dtype.root == t.ROW:
        return StructType([StructField(f.name, spark_type(f.type, f"{column}.{f.name}"), f.type.nullable)
                           for f in dtype.fields or ()])
    found = _SPARK_TYPES.get(dtype.root)
    if found is None:
        raise UnsupportedError(f"column '{column}' has type {dtype}, which Spark reads do not support yet")
    return found


def spark_schema(table: FileStoreTable, columns: Sequence[str] | None = None) -> StructType:
    """The Spark schema of a table's columns (all, or `columns` in that order)."""
    names = list(columns) if columns else table.schema.field_names
    fields = []
    for name in names:
        f = table.schema.field(name)
        fields.append(StructField(name, spark_type(f.type, name), f.type.nullable))
    return StructType(fields)
