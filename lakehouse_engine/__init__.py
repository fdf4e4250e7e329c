"""lakehouse_engine: an Apache Paimon-compatible primary-key table engine on pyarrow."""

from lakehouse_engine.catalog import Catalog, CatalogFactory, Identifier
from lakehouse_engine.errors import (
    ColumnAlreadyExistError,
    ColumnNotExistError,
    CommitConflictError,
    CorruptFileError,
    DatabaseNotExistError,
    InvalidDataError,
    InvalidIdentifierError,
    InvalidOptionError,
    LakehouseError,
    SchemaError,
    SnapshotNotExistError,
    StorageError,
    TableAlreadyExistError,
    TableNotExistError,
)
from lakehouse_engine.schema import Schema
from lakehouse_engine.schema_change import Move, SchemaChange
from lakehouse_engine.table import FileStoreTable

__all__ = [
    "Catalog", "CatalogFactory", "ColumnAlreadyExistError", "ColumnNotExistError", "CommitConflictError", "CorruptFileError", "DatabaseNotExistError",
    "FileStoreTable", "Identifier", "InvalidDataError", "InvalidIdentifierError", "InvalidOptionError",
    "LakehouseError", "Move", "Schema", "SchemaChange", "SchemaError", "SnapshotNotExistError", "StorageError", "TableAlreadyExistError",
    "TableNotExistError",
]
