"""One exception hierarchy for the engine: every failure a user can cause or meet is a LakehouseError.

Where pypaimon 2.1.0 raises `ValueError` (a missing snapshot or tag, a duplicate tag, a bad name),
ours derive from `ValueError` too, so pypaimon code's `except ValueError` catches them; the
not-found and already-exists errors of databases, tables, tags and columns do as well, and carry
the name in pypaimon's attribute (`.database`, `.identifier`, `.tag`, `.column`). pypaimon's
catalog exception names (`TableNotExistException`, ...) are aliases of ours, at the end of this
module, so one class satisfies both `except` clauses.
"""

from __future__ import annotations

from typing import Any


class LakehouseError(Exception):
    """Base class of every error the engine raises on purpose."""


class _NamedError(LakehouseError):
    """An error about one named thing, kept in the attribute pypaimon's exception has for it
    (`DatabaseNotExistException.database`, `TableNotExistException.identifier`,
    `TagAlreadyExistException.tag`, ...). Built as ours (`Error(message, name=...)`) or as
    pypaimon's (`Error(name)`, the message then made the way pypaimon makes it)."""

    #: The attribute that holds the name, and pypaimon's message for `Error(name)`.
    attribute = "name"
    pypaimon_message = "{} is invalid"

    def __init__(self, message: Any, name: Any = None):
        if name is None and not (isinstance(message, str) and " " in message.strip()):
            # pypaimon's form: the only argument is the name itself.
            name = message
            message = self.pypaimon_message.format(_full_name(name))
        super().__init__(message)
        setattr(self, self.attribute, name)

    def __reduce__(self) -> tuple[type, tuple[str, Any]]:
        # Picklable with its name (exceptions pickle their args only).
        return (type(self), (str(self), getattr(self, self.attribute)))


def _full_name(name: Any) -> str:
    full = getattr(name, "get_full_name", None)
    return str(full()) if callable(full) else str(name)


class InvalidIdentifierError(LakehouseError, ValueError):
    """A database or table name is malformed (empty, a path, a reserved character)."""


class DatabaseNotExistError(_NamedError, ValueError):
    """The named database (`.database`) does not exist in the warehouse."""

    attribute = "database"
    pypaimon_message = "Database {} does not exist"


class DatabaseAlreadyExistError(_NamedError, ValueError):
    """A database of that name (`.database`) already exists."""

    attribute = "database"
    pypaimon_message = "Database {} already exists"


class TableNotExistError(_NamedError, ValueError):
    """The named table (`.identifier`) does not exist in the warehouse."""

    attribute = "identifier"
    pypaimon_message = "Table {} does not exist"


class TableAlreadyExistError(_NamedError, ValueError):
    """A table of that name (`.identifier`) already exists."""

    attribute = "identifier"
    pypaimon_message = "Table {} already exists"


class InvalidArgumentError(LakehouseError, ValueError):
    """A call's argument is invalid (an empty list of partitions to drop, ...); nothing changed."""


# InvalidOptionError and SchemaError are also RuntimeErrors: Paimon (Java) raises them as
# RuntimeExceptions, and pypaimon's `catalog.alter_table` raises every failed change as a
# RuntimeError, which pypaimon code catches.
class InvalidOptionError(LakehouseError, ValueError, RuntimeError):
    """A table option has an invalid value, or options contradict each other."""


class SchemaError(LakehouseError, ValueError, RuntimeError):
    """A table schema is invalid, or input data does not match the table's schema."""


class InvalidDataError(LakehouseError, ValueError):
    """Input rows break a table constraint (a null primary key, an unknown row kind, ...)."""


# Also a RuntimeError, as Paimon's and pypaimon's commit conflicts are (pypaimon code catches it so).
class CommitConflictError(LakehouseError, RuntimeError):
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
    """A snapshot id or tag asked for does not exist (never written, or expired); the message
    says "doesn't exist", Paimon's words, which pypaimon code matches."""


class TagNotExistError(_NamedError, SnapshotNotExistError):
    """The named tag (`.tag`) does not exist (a ValueError, as pypaimon raises)."""

    attribute = "tag"
    pypaimon_message = "Tag {} does not exist"


class TagAlreadyExistError(_NamedError, ValueError):
    """A tag of that name (`.tag`) already exists (a ValueError, as pypaimon raises)."""

    attribute = "tag"
    pypaimon_message = "Tag {} already exists"


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


class ColumnNotExistError(_NamedError, SchemaError):
    """A schema change names a column (`.column`) the table does not have."""

    attribute = "column"
    pypaimon_message = "Column {} does not exist"


class ColumnAlreadyExistError(_NamedError, SchemaError):
    """A schema change adds or renames to a column name (`.column`) the table already has."""

    attribute = "column"
    pypaimon_message = "Column {} already exists"


# ---- pypaimon's names (pypaimon.catalog.catalog_exception), so its `except` clauses work ----
CatalogException = LakehouseError
DatabaseNotExistException = DatabaseNotExistError
DatabaseAlreadyExistException = DatabaseAlreadyExistError
TableNotExistException = TableNotExistError
TableAlreadyExistException = TableAlreadyExistError
ColumnNotExistException = ColumnNotExistError
ColumnAlreadyExistException = ColumnAlreadyExistError
TagNotExistException = TagNotExistError
TagAlreadyExistException = TagAlreadyExistError
