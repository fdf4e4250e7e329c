"""lakehouse_engine: an Apache Paimon-compatible primary-key table engine on pyarrow.

The public API is what this module exports, `lakehouse_engine.options` (the table options) and
`lakehouse_engine.spark` (pyspark needed); other modules are the engine's insides and may change.
Importing it loads neither pyspark, dagster nor pandas.
"""

from lakehouse_engine.catalog import Catalog, CatalogFactory, Identifier
from lakehouse_engine.errors import (
    ColumnAlreadyExistError,
    ColumnNotExistError,
    CommitConflictError,
    CorruptFileError,
    DatabaseNotExistError,
    InvalidArgumentError,
    InvalidDataError,
    InvalidIdentifierError,
    InvalidOptionError,
    LakehouseError,
    PostCommitError,
    SchemaError,
    SnapshotNotExistError,
    StorageError,
    TableAlreadyExistError,
    TableNotExistError,
    UnsupportedError,
    UnsupportedFeatureError,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.merge_engines.ordering import ROW_KIND_CODES
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.schema import BucketMode, Schema
from lakehouse_engine.schema_change import Move, SchemaChange
from lakehouse_engine.store.consumer_manager import Consumer
from lakehouse_engine.table import FileStoreTable

#: The row kinds a `rowkind.field` column may hold: +I, -U, +U, -D.
ROW_KINDS: tuple[str, ...] = tuple(ROW_KIND_CODES)

__all__ = [
    "POSTPONE_BUCKET", "ROW_KINDS", "BucketMode", "PostCommitError", "Snapshot",
    "Catalog", "CatalogFactory", "ColumnAlreadyExistError", "Consumer", "ColumnNotExistError", "CommitConflictError",
    "CorruptFileError", "DatabaseNotExistError", "FileStoreTable", "Identifier", "InvalidArgumentError", "InvalidDataError",
    "InvalidIdentifierError", "InvalidOptionError", "LakehouseError", "Move", "Schema", "SchemaChange",
    "SchemaError", "SnapshotNotExistError", "StorageError", "TableAlreadyExistError", "TableNotExistError",
    "UnsupportedError",
    "UnsupportedFeatureError",
]
