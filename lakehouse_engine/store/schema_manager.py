"""Schema versions of a table: read the latest `schema-N`, commit a new one with put-if-absent."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import replace

from lakehouse_engine.errors import CommitConflictError, TableNotExistError
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.merge_engines.merge_options import validate_merge_options
from lakehouse_engine.path_factory import PathFactory
from lakehouse_engine.schema import TableSchema

_SCHEMA_RE = re.compile(r"^schema-(\d+)$")


def check_new_schema(schema: TableSchema) -> None:
    """Every check a schema passes before it is written: its fields, keys and core options
    (`TableSchema.validate`) and its merge engine's per-field options.

    Raises:
        InvalidOptionError, SchemaError, UnsupportedError: naming the option or field at fault.
    """
    schema.validate()
    validate_merge_options(schema)


class SchemaManager:
    """The `schema/` directory of one table."""

    def __init__(self, file_io: FileIO, paths: PathFactory, table_name: str = ""):
        self.file_io = file_io
        self.paths = paths
        self.table_name = table_name

    def schema_ids(self) -> list[int]:
        ids = []
        for name in self.file_io.list_names(self.paths.schema_dir):
            m = _SCHEMA_RE.match(name)
            if m:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def latest(self) -> TableSchema:
        ids = self.schema_ids()
        if not ids:
            raise TableNotExistError(f"table {self.table_name} has no schema")
        path = self.paths.schema_path(ids[-1])
        # Bytes, not text: a file that is not UTF-8 is a damaged schema file, which the parser names.
        return TableSchema.from_json(self.file_io.read_bytes(path), path)

    def commit_options(self, updates: Mapping[str, str], retries: int = 10) -> TableSchema:
        """ALTER TABLE SET options: write `schema-(N+1)` with the updated options (validated)."""
        for _ in range(retries + 1):
            current = self.latest()
            options = dict(current.options)
            options.update({str(k): str(v) for k, v in updates.items()})
            new = replace(current, id=current.id + 1, options=options, time_millis=int(time.time() * 1000))
            check_new_schema(new)
            if self.file_io.try_put_if_absent(self.paths.schema_path(new.id), new.to_json().encode()):
                return new
        raise CommitConflictError(f"table {self.table_name}: could not commit a new schema after {retries} retries")
