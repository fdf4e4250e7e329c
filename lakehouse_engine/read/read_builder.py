"""ReadBuilder: pypaimon's entry point for reads (projection, filter, limit, snapshot)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakehouse_engine.errors import SchemaError
from lakehouse_engine.options import SCAN_SNAPSHOT_ID, SCAN_TAG_NAME
from lakehouse_engine.read.incremental import IncrementalRead, IncrementalScan, is_incremental
from lakehouse_engine.read.nested_projection import (
    NestedProjectionRead,
    is_nested_projection,
    projected_field,
    projection_path,
)
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.read.table_read import TableRead
from lakehouse_engine.schema import DataField

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


class ReadBuilder:
    """Collects read settings, then builds a TableScan and a TableRead that agree on them."""

    def __init__(self, table: FileStore):
        self.table = table
        self._projection: list[str] | None = None
        self._predicate: Predicate | None = None
        self._limit: int | None = None
        self._snapshot_id: int | None = None
        self._tag: str | None = None
        self._keep_schema = False
        # The table a time-travel read sees (resolved once: the scan, read and types agree).
        self._time_travel_table: FileStore | None = None

    def with_projection(self, projection: Sequence[str]) -> ReadBuilder:
        """Read only these columns; `col.field` reads one field of a ROW column (as `col_field`)."""
        self._projection = list(projection)
        if self._snapshot_id is None and self._tag is None:
            self._check_projection(self.table)
        return self

    def _check_projection(self, table: FileStore) -> None:
        # An unknown dotted name is skipped, as pypaimon skips it (a path into a ROW column that
        # this schema does not have); an unknown plain name is an error, as in Paimon (Java).
        names = table.schema.field_names
        unknown = [p for p in self._projection or ()
                   if "." not in p and projection_path(table.schema, p) is None]
        if unknown:
            raise SchemaError(f"projection names unknown fields {unknown} of table {table.name} "
                              f"(schema {table.schema.id}: {', '.join(names)})")

    def _resolved_projection(self, table: FileStore) -> list[str] | None:
        """The projection without the dotted names `table`'s schema does not have."""
        self._check_projection(table)
        if self._projection is None:
            return None
        return [p for p in self._projection if projection_path(table.schema, p) is not None]

    def read_table(self) -> FileStore:
        """The table as the snapshot read saw it: time travel (`with_snapshot`, `with_tag`, the
        `scan.snapshot-id` / `scan.tag-name` options) reads a snapshot with its own schema."""
        options = self.table.schema.options
        if self._keep_schema or (self._snapshot_id is None and self._tag is None and SCAN_SNAPSHOT_ID.key not in options
                and SCAN_TAG_NAME.key not in options):
            return self.table
        if self._time_travel_table is None:
            snapshot = self.table.resolve_snapshot(self._snapshot_id, self._tag)
            self._time_travel_table = (self.table if snapshot is None
                                       else self.table.at_schema(snapshot.schema_id))
        return self._time_travel_table

    def with_filter(self, predicate: Predicate | None) -> ReadBuilder:
        self._predicate = predicate
        return self

    def with_limit(self, limit: int) -> ReadBuilder:
        self._limit = limit
        return self

    def with_snapshot(self, snapshot_id: int) -> ReadBuilder:
        """Time travel: read the table as of `snapshot_id`."""
        self._snapshot_id = snapshot_id
        self._time_travel_table = None
        return self

    def with_tag(self, tag: str) -> ReadBuilder:
        """Read the snapshot a tag keeps."""
        self._tag = tag
        self._time_travel_table = None
        return self

    def with_table_schema(self) -> ReadBuilder:
        """Read the chosen snapshot with this handle's schema rather than the snapshot's own
        (a reader that pinned the latest snapshot and the latest schema separately)."""
        self._keep_schema = True
        return self

    def new_predicate_builder(self) -> PredicateBuilder:
        schema = self.read_table().schema
        return PredicateBuilder(schema.field_names, {f.name: f.type.to_arrow() for f in schema.fields})

    def new_scan(self) -> TableScan:
        if self._snapshot_id is None and self._tag is None and is_incremental(self.table):
            # `incremental-between` and friends: the changes of a range, merged per key.
            return IncrementalScan(self.table, self._predicate)  # type: ignore[return-value]
        return TableScan(self.read_table(), self._predicate, self._snapshot_id, self._tag)

    def new_read(self) -> TableRead:
        table = self.read_table()
        projection = self._resolved_projection(table)
        if self._snapshot_id is None and self._tag is None and is_incremental(table):
            return IncrementalRead(table, projection, self._predicate)  # type: ignore[return-value]
        if projection and is_nested_projection(table.schema, projection):
            return NestedProjectionRead(table, projection, self._predicate, self._limit)
        return TableRead(table, projection, self._predicate, self._limit)

    def read_type(self) -> list[DataField]:
        """The fields a read returns, in order (pypaimon's `read_type`; `.name` of each for names)."""
        table = self.read_table()
        projection = self._resolved_projection(table)
        return [projected_field(table.schema, n) for n in (projection or table.schema.field_names)]
