"""Schema versions of a table: read the latest `schema-N`, commit a new one with put-if-absent."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CommitConflictError, TableNotExistError
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.data_file_formats import check_format_fits
from lakehouse_engine.mergetree.merge_engines.merge_options import validate_merge_options
from lakehouse_engine.options.support import check_supported
from lakehouse_engine.path_factory import PathFactory
from lakehouse_engine.schema import TableSchema

if TYPE_CHECKING:
    from lakehouse_engine.schema_change import SchemaChange

_SCHEMA_RE = re.compile(r"^schema-(\d+)$")


def check_new_schema(schema: TableSchema, previous: TableSchema | None = None) -> None:
    """Every check a schema passes before it is written: its fields, keys and core options
    (`TableSchema.validate`), its merge engine's per-field options, whether its file formats
    can hold its column types and compression, and that the options it sets (those that differ
    from `previous`, else all) are neither refused by this engine nor a near miss of a known key.

    Raises:
        InvalidOptionError, SchemaError, UnsupportedError: naming the option or field at fault.
    """
    before = previous.options if previous is not None else {}
    check_supported(schema.options, [k for k, v in schema.options.items() if before.get(k) != v])
    schema.validate()
    validate_merge_options(schema)
    check_format_fits(schema.core_options, {f.name: f.type for f in schema.fields})


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

    def latest_id_from(self, known_id: int) -> int:
        """The latest schema id, given that `known_id` exists: probes `schema-(N+1)`, ... one file
        at a time instead of listing the directory (a commit must not list on object stores)."""
        latest = known_id
        while self.file_io.exists(self.paths.schema_path(latest + 1)):
            latest += 1
        return latest

    def latest(self) -> TableSchema:
        ids = self.schema_ids()
        if not ids:
            raise TableNotExistError(f"table {self.table_name} has no schema")
        return self.schema(ids[-1])

    def schema(self, schema_id: int) -> TableSchema:
        """Schema version `schema_id` (`schema/schema-<id>`)."""
        path = self.paths.schema_path(schema_id)
        try:
            # Bytes, not text: a file that is not UTF-8 is a damaged schema file, which the parser names.
            data = self.file_io.read_bytes(path)
        except FileNotFoundError:
            raise TableNotExistError(f"table {self.table_name} has no schema {schema_id} ({path})") from None
        return TableSchema.from_json(data, path)

    def commit_changes(self, changes: Sequence[SchemaChange], has_snapshots: Callable[[], bool]) -> TableSchema:
        """ALTER TABLE: write `schema-(N+1)`, the latest schema with `changes` applied, put-if-absent.

        Raises the rule's error (nothing written) when a change breaks one of Paimon's rules, and
        CommitConflictError when another alter wrote `schema-(N+1)` first: the changes were
        checked against a schema that is no longer the latest, so they are not retried blindly.
        """
        from lakehouse_engine.schema_evolution import apply_schema_changes

        current = self.latest()
        new = apply_schema_changes(current, changes, has_snapshots)
        check_new_schema(new, current)
        if not self.file_io.try_put_if_absent(self.paths.schema_path(new.id), new.to_json().encode()):
            raise CommitConflictError(
                f"alter table {self.table_name}: another alter wrote schema {new.id} first (this one "
                f"was checked against schema {current.id}); nothing was changed, reload the table "
                f"and alter again")
        return new

    def commit_options(self, updates: Mapping[str, str], retries: int = 10) -> TableSchema:
        """ALTER TABLE SET options: write `schema-(N+1)` with the updated options (validated)."""
        for _ in range(retries + 1):
            current = self.latest()
            options = dict(current.options)
            options.update({str(k): str(v) for k, v in updates.items()})
            new = replace(current, id=current.id + 1, options=options, time_millis=int(time.time() * 1000))
            check_new_schema(new, current)
            if self.file_io.try_put_if_absent(self.paths.schema_path(new.id), new.to_json().encode()):
                return new
        raise CommitConflictError(f"table {self.table_name}: could not commit a new schema after {retries} retries")
