"""One exception hierarchy for the engine: every failure a user can cause or meet is a LakehouseError.

Where pypaimon 2.1.0 raises `ValueError` (a missing snapshot or tag, a duplicate tag, a bad name),
ours derive from `ValueError` too, so pypaimon code's `except ValueError` catches them; the
not-found and already-exists errors of databases and tables do as well. pypaimon's catalog
exception names (`TableNotExistException`, ...) are aliases of ours, at the end of this module.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """Base class of every error the engine raises on purpose."""


class InvalidIdentifierError(LakehouseError, ValueError):
    """A database or table name is malformed (empty, a path, a reserved character)."""


class DatabaseNotExistError(LakehouseError, ValueError):
    """The named database does not exist in the warehouse."""


class DatabaseAlreadyExistError(LakehouseError, ValueError):
    """A database of that name already exists."""


class TableNotExistError(LakehouseError, ValueError):
    """The named table does not exist in the warehouse."""


class TableAlreadyExistError(LakehouseError, ValueError):
    """A table of that name already exists."""


class InvalidOptionError(LakehouseError, ValueError):
    """A table option has an invalid value, or options contradict each other."""


class SchemaError(LakehouseError, ValueError):
    """A table schema is invalid, or input data does not match the table's schema."""


class InvalidDataError(LakehouseError, ValueError):
    """Input rows break a table constraint (a null primary key, an unknown row kind, ...)."""


class CommitConflictError(LakehouseError):
    """A commit could not be applied on top of the latest snapshot (files it deletes are gone, ...)."""


class CommitTimeoutError(CommitConflictError):
    """A commit kept losing the race for the next snapshot id until its retries ran out."""


class PostCommitError(LakehouseError):
    """The data of a commit landed (`snapshot_ids`), then a follow-up of it failed; retrying the
    same commit is a no-op that returns those snapshots."""

    def __init__(self, message: str, snapshot_ids: list[int]):
        super().__init__(message)
        self.snapshot_ids = list(snapshot_ids)

    def __reduce__(self) -> tuple[type, tuple[str, list[int]]]:
        # Picklable with its snapshot ids, so it crosses process boundaries (Spark, Dagster).
        return (type(self), (str(self), self.snapshot_ids))


class StorageError(LakehouseError, OSError):
    """The filesystem failed an operation (disk full, permission denied, ...); names table and path."""


class SnapshotNotExistError(LakehouseError, ValueError):
    """A snapshot id or tag asked for does not exist (never written, or expired)."""


class CorruptFileError(LakehouseError):
    """A metadata or data file cannot be decoded; the message names the file."""


class DataFileMissingError(CorruptFileError):
    """A data file a snapshot lists is not there (deleted, or expired after a compaction replaced it)."""


class UnsupportedError(LakehouseError, NotImplementedError):
    """A feature of the Paimon format that this engine does not (yet) handle."""


class UnsupportedFeatureError(UnsupportedError):
    """A table's files or options use a feature that changes which rows a read returns (deletion
    vectors, data evolution, external paths, ...) and that this engine does not apply: it raises
    rather than read past it, and refuses to write into such a table."""


class ColumnNotExistError(SchemaError):
    """A schema change names a column the table does not have."""


class ColumnAlreadyExistError(SchemaError):
    """A schema change adds or renames to a column name the table already has."""


# ---- pypaimon's names (pypaimon.catalog.catalog_exception), so its `except` clauses work ----
CatalogException = LakehouseError
DatabaseNotExistException = DatabaseNotExistError
DatabaseAlreadyExistException = DatabaseAlreadyExistError
TableNotExistException = TableNotExistError
TableAlreadyExistException = TableAlreadyExistError
ColumnNotExistException = ColumnNotExistError
ColumnAlreadyExistException = ColumnAlreadyExistError
