"""A filesystem catalog: a warehouse of databases (`<db>.db/`) holding Paimon tables."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakehouse_engine.errors import (
    DatabaseAlreadyExistError,
    DatabaseNotExistError,
    InvalidIdentifierError,
    TableAlreadyExistError,
    TableNotExistError,
)
from lakehouse_engine.invisible_chars import invisible_character, printable
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.merge_engines.merge_options import validate_merge_options
from lakehouse_engine.path_factory import PathFactory
from lakehouse_engine.schema import Schema, TableSchema
from lakehouse_engine.store.schema_manager import SchemaManager
from lakehouse_engine.table import FileStoreTable

DB_SUFFIX = ".db"
_BAD_NAME_RE = re.compile(r"[/\\.$\x00-\x1f\x7f]")


def validate_name(name: str, what: str) -> str:
    """Check a database or table name: no path separators, dots, `$`, control, format (bidirectional,
    zero-width) characters or blanks."""
    bad = invisible_character(name) if isinstance(name, str) else None
    if bad is not None:
        raise InvalidIdentifierError(
            f"{what} name {printable(name)} contains the invisible character {bad}; "
            f"use printable characters only")
    if not isinstance(name, str) or not name or name != name.strip():
        raise InvalidIdentifierError(f"{what} name {name!r} is empty or has surrounding blanks")
    if len(name) > 255 or _BAD_NAME_RE.search(name):
        raise InvalidIdentifierError(
            f"{what} name {name!r} is invalid: names may not contain '/', '\\', '.', '$' or control "
            f"characters, and are at most 255 characters")
    return name


@dataclass(frozen=True)
class Identifier:
    """A validated `database.table` name."""

    database: str
    table: str

    @staticmethod
    def parse(identifier: str | Identifier) -> Identifier:
        if isinstance(identifier, Identifier):
            return identifier
        if not isinstance(identifier, str) or identifier.count(".") != 1:
            raise InvalidIdentifierError(
                f"table identifier {identifier!r} must look like 'database.table'")
        db, table = identifier.split(".")
        return Identifier(validate_name(db, "database"), validate_name(table, "table"))

    def full_name(self) -> str:
        return f"{self.database}.{self.table}"

    def get_full_name(self) -> str:
        return self.full_name()

    def __str__(self) -> str:
        return self.full_name()


class Catalog:
    """The tables under one warehouse root (a local path or a pyarrow.fs URI)."""

    def __init__(self, warehouse: str, options: Mapping[str, str] | None = None):
        self.warehouse = warehouse
        self.options = dict(options or {})
        self.file_io, self.root = FileIO.for_warehouse(warehouse, self.options)

    # ---- databases -----------------------------------------------------------
    def database_path(self, name: str) -> str:
        return f"{self.root}/{validate_name(name, 'database')}{DB_SUFFIX}"

    def list_databases(self) -> list[str]:
        return sorted(
            s.path.rsplit("/", 1)[-1][: -len(DB_SUFFIX)]
            for s in self.file_io.list_status(self.root)
            if s.is_dir and s.path.endswith(DB_SUFFIX)
        )

    def database_exists(self, name: str) -> bool:
        return self.file_io.is_dir(self.database_path(name))

    def create_database(self, name: str, ignore_if_exists: bool = False,
                        properties: Mapping[str, str] | None = None) -> None:
        """Create a database directory; DatabaseAlreadyExistError unless `ignore_if_exists`."""
        path = self.database_path(name)
        if self.file_io.is_dir(path):
            if ignore_if_exists:
                return
            raise DatabaseAlreadyExistError(f"database '{name}' already exists in {self.warehouse}")
        self.file_io.mkdirs(path)

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        path = self.database_path(name)
        if not self.file_io.is_dir(path):
            if ignore_if_not_exists:
                return
            raise DatabaseNotExistError(f"database '{name}' does not exist in {self.warehouse}")
        if self.list_tables(name) and not cascade:
            raise DatabaseNotExistError(
                f"database '{name}' is not empty; drop its tables first or pass cascade=True")
        self.file_io.delete_dir(path)

    # ---- tables --------------------------------------------------------------
    def table_path(self, identifier: str | Identifier) -> str:
        ident = Identifier.parse(identifier)
        return f"{self.database_path(ident.database)}/{ident.table}"

    def list_tables(self, database: str) -> list[str]:
        path = self.database_path(database)
        if not self.file_io.is_dir(path):
            raise DatabaseNotExistError(f"database '{database}' does not exist in {self.warehouse}")
        names = []
        for s in self.file_io.list_status(path):
            if s.is_dir and self.file_io.is_dir(f"{s.path}/schema"):
                names.append(s.path.rsplit("/", 1)[-1])
        return sorted(names)

    def table_exists(self, identifier: str | Identifier) -> bool:
        return bool(self._schema_ids(self.table_path(identifier)))

    def _schema_ids(self, table_path: str) -> list[int]:
        return SchemaManager(self.file_io, PathFactory(table_path)).schema_ids()

    def create_table(self, identifier: str | Identifier, schema: Schema,
                     ignore_if_exists: bool = False) -> None:
        """Create a table from `schema`; validates keys and options before writing anything."""
        ident = Identifier.parse(identifier)
        if not self.database_exists(ident.database):
            raise DatabaseNotExistError(
                f"database '{ident.database}' does not exist in {self.warehouse}; create it first")
        table_schema = TableSchema.from_schema(schema)
        validate_merge_options(table_schema)  # (from_schema checked the fields and core options)
        path = self.table_path(ident)
        if self._schema_ids(path):
            if ignore_if_exists:
                return
            raise TableAlreadyExistError(f"table '{ident}' already exists")
        paths = PathFactory(path)
        if not self.file_io.try_put_if_absent(paths.schema_path(0), table_schema.to_json().encode()):
            if ignore_if_exists:
                return
            raise TableAlreadyExistError(f"table '{ident}' already exists")

    def get_table(self, identifier: str | Identifier) -> FileStoreTable:
        """Load a table at its latest schema; TableNotExistError when there is none."""
        ident = Identifier.parse(identifier)
        path = self.table_path(ident)
        if not self._schema_ids(path):
            raise TableNotExistError(f"table '{ident}' does not exist in {self.warehouse}")
        schema = SchemaManager(self.file_io, PathFactory(path), ident.full_name()).latest()
        return FileStoreTable(self.file_io, ident.full_name(), path, schema)

    def drop_table(self, identifier: str | Identifier, ignore_if_not_exists: bool = False) -> None:
        ident = Identifier.parse(identifier)
        path = self.table_path(ident)
        if not self._schema_ids(path):
            if ignore_if_not_exists:
                return
            raise TableNotExistError(f"table '{ident}' does not exist in {self.warehouse}")
        self.file_io.delete_dir(path)


class CatalogFactory:
    """pypaimon-style entry point: `CatalogFactory.create({"warehouse": path})`."""

    @staticmethod
    def create(options: Mapping[str, Any]) -> Catalog:
        if "warehouse" not in options:
            raise InvalidIdentifierError("catalog options need 'warehouse' (a path or URI)")
        return Catalog(str(options["warehouse"]), {k: str(v) for k, v in options.items()})
