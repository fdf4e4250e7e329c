"""Nested field projection: `with_projection(["address.city"])` reads one field of a ROW column.

As pypaimon names them, a projected nested field is a column named by its path joined with `_`
(`address_city`), nullable when any ROW on its path is. The whole top-level column is read and
the field taken from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import SchemaError
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.read.table_read import TableRead
from lakehouse_engine.schema import DataField, TableSchema
from lakehouse_engine.types import ROW, DataType

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def projection_path(schema: TableSchema, name: str) -> list[str] | None:
    """The ROW path a projected name stands for: [name] for a top-level column, [col, field, ...]
    for `col.field...`; None when it names neither."""
    if name in schema.field_names:
        return [name]
    parts = name.split(".")
    if len(parts) < 2 or parts[0] not in schema.field_names:
        return None
    t: DataType = schema.field(parts[0]).type
    for part in parts[1:]:
        if t.root != ROW:
            return None
        inner = [f for f in t.fields or () if f.name == part]
        if not inner:
            return None
        t = inner[0].type
    return parts


def projected_field(schema: TableSchema, name: str) -> DataField:
    """The field a projected name reads: the column, or for `col.field...` the ROW field under the
    name its output column has (`col_field`), nullable when any ROW on its path is."""
    path = projection_path(schema, name)
    if path is None:
        raise SchemaError(f"projection names unknown field {name!r}")
    top = schema.field(path[0])
    if len(path) == 1:
        return top
    field_id, t, nullable, description = top.id, top.type, top.type.nullable, top.description
    for part in path[1:]:
        inner = next(f for f in t.fields or () if f.name == part)
        field_id, t, description = inner.id, inner.type, inner.description
        nullable = nullable or t.nullable
    return DataField(field_id, "_".join(path), replace(t, nullable=nullable), description)


def is_nested_projection(schema: TableSchema, projection: Sequence[str]) -> bool:
    return any(name not in schema.field_names for name in projection)


class NestedProjectionRead(TableRead):
    """A TableRead whose projection holds nested ROW paths: reads their top-level columns, then
    takes the fields out of them."""

    def __init__(self, table: FileStore, projection: Sequence[str],
                 predicate: Predicate | None = None, limit: int | None = None):
        schema = table.schema
        paths = []
        for name in projection:
            path = projection_path(schema, name)
            if path is None:
                raise SchemaError(f"projection names unknown field {name!r} of table {table.name}")
            paths.append(path)
        top = list(dict.fromkeys(p[0] for p in paths))
        super().__init__(table, top, predicate, limit)
        # Reads the top-level columns (cast to their own schema); this read reshapes its output.
        self._columns_read = TableRead(table, top, predicate, limit)
        self._paths = paths
        fields = []
        for path in paths:
            f = schema.field(path[0]).to_arrow()
            t, nullable = f.type, f.nullable
            for part in path[1:]:
                inner = t.field(part)
                t, nullable = inner.type, nullable or inner.nullable
            fields.append(pa.field("_".join(path), t, nullable=nullable))
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise SchemaError(f"projection {list(projection)} names one output column twice: {names}")
        self.output_schema = pa.schema(fields)

    def read_split_ranges(self, split: DataSplit) -> Iterator[pa.Table]:
        """The split's rows one key range at a time, as TableRead reads them, each reshaped into
        the projected fields: every read path (`to_arrow`, batches, `read_split`) goes through here."""
        for table in self._columns_read.read_split_ranges(split):
            yield self.reshape(table)

    @property
    def columns_schema(self) -> pa.Schema:
        """The top-level columns read, before `reshape` takes the projected fields out of them."""
        return self._columns_read.output_schema

    def reshape(self, table: pa.Table) -> pa.Table:
        """The projected fields out of a table of the top-level columns read."""
        columns = []
        for path in self._paths:
            column = table.column(path[0])
            if len(path) > 1:
                column = pc.struct_field(column, path[1:])
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=self.output_schema)
