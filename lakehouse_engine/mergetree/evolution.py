"""Read data files written under an older (or newer) schema version, mapping columns by field id.

A data file records the schema id it was written with (`_SCHEMA_ID` of its manifest entry). As
Paimon's readers do, columns are matched by field id, not by name: a column added since reads as
nulls, a dropped one is not read, a renamed one is read under its old name, a widened one is
cast. Files of the reader's own schema id (or of a schema with the same fields, such as one that
only changed options) are read exactly as before, so a table that never changed shape pays
nothing for this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import CommitConflictError, SchemaError
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.data_file_reader import read_data_file, read_data_file_batches
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, TableSchema

_SYSTEM_TYPES = {SEQUENCE_NUMBER: pa.int64(), VALUE_KIND: pa.int8()}


@dataclass(frozen=True)
class _Mapping:
    """How to read some columns of the target schema from files of one other schema version."""

    identity: bool
    file_columns: list[str]            # names in the file, for the columns that exist there
    file_schema: pa.Schema             # their types as the file's schema has them
    sources: list[str | None]          # per requested column: its file name, or None (added since)


class EvolvingFileReader:
    """Reads data files of any schema version of a table as columns of `schema`.

    `schema_by_id` gives a schema version by id (cached by the table). With `for_rewrite` a file
    of a *newer* schema than `schema` is refused with CommitConflictError: rewriting it (compaction,
    rescale) into the older schema would lose the columns added since.
    """

    def __init__(self, file_io: FileIO, schema: TableSchema, schema_by_id: Callable[[int], TableSchema],
                 table_name: str = "", for_rewrite: bool = False):
        self.file_io = file_io
        self.schema = schema
        self.schema_by_id = schema_by_id
        self.table_name = table_name
        self.for_rewrite = for_rewrite
        self._mappings: dict[tuple[int, tuple[str, ...]], _Mapping] = {}

    def read(self, path: str, columns: Sequence[str], read_schema: pa.Schema, meta: DataFileMeta,
             schema_file: str | None = None) -> pa.Table:
        """Columns `columns` (names of this reader's schema) of one file, typed as `read_schema`.

        `schema_file` (the path of this reader's schema) is named when a file of that schema
        lacks a column it names: either file may be the damaged one."""
        if meta.schema_id == self.schema.id:
            return read_data_file(self.file_io, path, columns, read_schema, meta=meta,
                                  schema_file=schema_file)
        self._check_not_newer(path, meta)
        mapping = self._mapping(meta.schema_id, tuple(columns))
        if mapping.identity:
            return read_data_file(self.file_io, path, columns, read_schema, meta=meta)
        rows = read_data_file(self.file_io, path, mapping.file_columns, mapping.file_schema, meta=meta)
        return self._evolve(rows, mapping, read_schema, path, meta)

    def read_batches(self, path: str, columns: Sequence[str], read_schema: pa.Schema,
                     meta: DataFileMeta, batch_bytes: int,
                     schema_file: str | None = None) -> Iterator[pa.Table]:
        """As `read`, as consecutive batches of about `batch_bytes` decoded bytes each (see
        `read_data_file_batches`): what a merge of bounded memory reads."""
        if meta.schema_id == self.schema.id:
            yield from read_data_file_batches(self.file_io, path, columns, read_schema, meta,
                                              batch_bytes, schema_file)
            return
        self._check_not_newer(path, meta)
        mapping = self._mapping(meta.schema_id, tuple(columns))
        if mapping.identity:
            yield from read_data_file_batches(self.file_io, path, columns, read_schema, meta, batch_bytes)
            return
        for rows in read_data_file_batches(self.file_io, path, mapping.file_columns,
                                           mapping.file_schema, meta, batch_bytes):
            yield self._evolve(rows, mapping, read_schema, path, meta)

    def _check_not_newer(self, path: str, meta: DataFileMeta) -> None:
        if self.for_rewrite and meta.schema_id > self.schema.id:
            raise CommitConflictError(
                f"table {self.table_name}: data file {path} was written with schema "
                f"{meta.schema_id}, newer than schema {self.schema.id} of this table handle; "
                f"nothing was committed, reload the table (catalog.get_table) and run again")

    def _evolve(self, rows: pa.Table, mapping: _Mapping, read_schema: pa.Schema, path: str,
                meta: DataFileMeta) -> pa.Table:
        """Rows read by `mapping`'s file columns as columns of `read_schema`."""
        arrays: list[pa.Array | pa.ChunkedArray] = []
        for target, source in zip(read_schema, mapping.sources, strict=True):
            if source is None:
                arrays.append(pa.nulls(rows.num_rows, target.type))
                continue
            column = rows.column(source)
            if column.type != target.type:
                # Integers widened to FLOAT/DOUBLE round as Paimon's cast does; Arrow's safe cast
                # would refuse any integer beyond the float's exact range.
                rounding = pa.types.is_integer(column.type) and pa.types.is_floating(target.type)
                try:
                    column = pc.cast(column, target.type, safe=not rounding)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaError(
                        f"table {self.table_name}: column '{target.name}' of data file {path} "
                        f"(schema {meta.schema_id}) cannot be read as {target.type}: {e}") from None
            arrays.append(column)
        return pa.Table.from_arrays(arrays, schema=read_schema)

    def _mapping(self, schema_id: int, columns: tuple[str, ...]) -> _Mapping:
        key = (schema_id, columns)
        found = self._mappings.get(key)
        if found is None:
            found = self._mappings[key] = self._build(self.schema_by_id(schema_id), columns)
        return found

    def _build(self, file_schema: TableSchema, columns: tuple[str, ...]) -> _Mapping:
        by_id = {f.id: f for f in file_schema.fields}
        file_columns: list[str] = []
        file_fields: list[pa.Field] = []
        sources: list[str | None] = []
        identity = True
        for name in columns:
            is_key = name.startswith(KEY_FIELD_PREFIX)
            field_name = name[len(KEY_FIELD_PREFIX):] if is_key else name
            if field_name not in self.schema.field_names:
                # `_SEQUENCE_NUMBER`, `_VALUE_KIND`: the same in every version.
                sources.append(name)
                file_columns.append(name)
                system_type = _SYSTEM_TYPES.get(name)
                if system_type is None:
                    raise SchemaError(f"table {self.table_name}: no column '{name}' in schema {self.schema.id}")
                file_fields.append(pa.field(name, system_type, nullable=False))
                continue
            field = self.schema.field(field_name)
            old = by_id.get(field.id)
            if old is None:
                if is_key:
                    raise SchemaError(
                        f"table {self.table_name}: key field '{field_name}' (id {field.id}) is "
                        f"missing from schema {file_schema.id}")
                sources.append(None)
                identity = False
                continue
            source = KEY_FIELD_PREFIX + old.name if is_key else old.name
            if old.name != field.name or old.type.copy(True) != field.type.copy(True):
                identity = False
            sources.append(source)
            file_columns.append(source)
            file_fields.append(pa.field(source, old.type.to_arrow(), nullable=old.type.nullable and not is_key))
        return _Mapping(identity, file_columns, pa.schema(file_fields), sources)
