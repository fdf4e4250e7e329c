"""Paimon's `write.merge-schema` for Spark writes: columns a DataFrame has and the table lacks are
added to the table (one `alter_table`) before any row is written.

Without it, such a write fails with SchemaError naming the columns (`write.check_columns`). With
it, each new column is added as a nullable column of the DataFrame's type, and columns the table
has and the DataFrame lacks are written as nulls (they must be nullable). Types are not merged:
a column present on both sides keeps the table's type, and values are cast as any write casts.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from lakehouse_engine.errors import SchemaError
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.spark.spark_types import spark_schema
from lakehouse_engine.spark.tables import TableRef
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.types import DataType

#: Paimon's write option (Spark: `.option("write.merge-schema", "true")`).
WRITE_MERGE_SCHEMA = "write.merge-schema"


def merge_schema_requested(table: FileStoreTable, options: Mapping[str, str] | None = None) -> bool:
    """True when the write options or the table's options set `write.merge-schema`."""
    value = (options or {}).get(WRITE_MERGE_SCHEMA) or table.schema.options.get(WRITE_MERGE_SCHEMA)
    return str(value).strip().lower() == "true"


def add_new_columns(columns: list[str], arrow_types: Mapping[str, pa.DataType], ref: TableRef,
                    table: FileStoreTable) -> FileStoreTable:
    """Add the `columns` the table lacks (nullable, in the given order); the table reopened."""
    new = [c for c in columns if c not in table.schema.field_names]
    if not new:
        return table
    changes: list[SchemaChange] = []
    for name in new:
        try:
            dtype = DataType.from_arrow(arrow_types[name], nullable=True)
        except SchemaError as e:
            raise SchemaError(f"write.merge-schema: column '{name}' of the DataFrame cannot be added "
                              f"to table {table.name}: {e}") from None
        changes.append(SchemaChange.add_column(name, dtype))
    ref.catalog().alter_table(ref.identifier, changes)
    return ref.open()


def merge_dataframe_schema(df: DataFrame, ref: TableRef, table: FileStoreTable) -> tuple[DataFrame, FileStoreTable]:
    """`df` and `table` after merging schemas: new columns added to the table, missing ones as nulls."""
    arrow = to_arrow_schema(df.schema, timezone="UTC")
    table = add_new_columns(df.columns, {f.name: f.type for f in arrow}, ref, table)
    missing = [n for n in table.schema.field_names if n not in df.columns]
    not_null = [n for n in missing if not table.schema.field(n).type.nullable]
    if not_null:
        raise SchemaError(f"DataFrame lacks columns {not_null} of table {table.name}, which are NOT NULL")
    if missing:
        types = spark_schema(table, missing)
        df = df.select(*df.columns, *[F.lit(None).cast(types[n].dataType).alias(n) for n in missing])
    return df, table
