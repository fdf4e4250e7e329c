"""ReadBuilder: pypaimon's entry point for reads (projection, filter, limit, snapshot)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakehouse_engine.errors import SchemaError
from lakehouse_engine.read.nested_projection import (
    NestedProjectionRead,
    is_nested_projection,
    projection_path,
)
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.read.table_read import TableRead

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable


class ReadBuilder:
    """Collects read settings, then builds a TableScan and a TableRead that agree on them."""

    def __init__(self, table: FileStoreTable):
        self.table = table
        self._projection: list[str] | None = None
        self._predicate: Predicate | None = None
        self._limit: int | None = None
        self._snapshot_id: int | None = None
        self._tag: str | None = None

    def with_projection(self, projection: Sequence[str]) -> ReadBuilder:
        """Read only these columns; `col.field` reads one field of a ROW column (as `col_field`)."""
        schema = self.table.schema
        unknown = [p for p in projection if projection_path(schema, p) is None]
        if unknown:
            raise SchemaError(f"projection names unknown fields {unknown} of table {self.table.name}")
        self._projection = list(projection)
        return self

    def with_filter(self, predicate: Predicate | None) -> ReadBuilder:
        self._predicate = predicate
        return self

    def with_limit(self, limit: int) -> ReadBuilder:
        self._limit = limit
        return self

    def with_snapshot(self, snapshot_id: int) -> ReadBuilder:
        """Time travel: read the table as of `snapshot_id`."""
        self._snapshot_id = snapshot_id
        return self

    def with_tag(self, tag: str) -> ReadBuilder:
        """Read the snapshot a tag keeps."""
        self._tag = tag
        return self

    def new_predicate_builder(self) -> PredicateBuilder:
        schema = self.table.schema
        return PredicateBuilder(schema.field_names, {f.name: f.type.to_arrow() for f in schema.fields})

    def new_scan(self) -> TableScan:
        return TableScan(self.table, self._predicate, self._snapshot_id, self._tag)

    def new_read(self) -> TableRead:
        if self._projection and is_nested_projection(self.table.schema, self._projection):
            return NestedProjectionRead(self.table, self._projection, self._predicate, self._limit)
        return TableRead(self.table, self._projection, self._predicate, self._limit)

    def read_type(self) -> list[str]:
        return self._projection or self.table.schema.field_names
