"""A filesystem catalog: a warehouse of databases (`<db>.db/`) holding Paimon tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehouse_engine.errors import (
    DatabaseAlreadyExistError,
    DatabaseNotExistError,
    InvalidIdentifierError,
    TableAlreadyExistError,
    TableNotExistError,
    UnsupportedError,
)
from lakehouse_engine.identifier import Identifier, validate_name
from lakehouse_engine.io import storage_errors
from lakehouse_engine.io_warehouse import warehouse_file_io
from lakehouse_engine.maintenance.branches import validate_branch_name
from lakehouse_engine.maintenance.partitions import PagedList, PartitionStatistics, page_partitions
from lakehouse_engine.maintenance.tags import GetTagResponse, TagNotExistError, get_tag_response
from lakehouse_engine.options import BRANCH
from lakehouse_engine.options.startup import check_stored_startup_options
from lakehouse_engine.path_factory import PathFactory
from lakehouse_engine.schema import Schema, TableSchema
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.store.file_store import BranchNotExistError
from lakehouse_engine.store.schema_manager import SchemaManager, check_new_schema
from lakehouse_engine.table import FileStoreTable

DB_SUFFIX = ".db"


def _main_only(identifier: str | Identifier, what: str) -> Identifier:
    """The identifier, which must name a table's main branch for `what`."""
    ident = _identifier(identifier)
    if ident.branch is not None:
        raise InvalidIdentifierError(f"{what}: {ident} names branch {ident.branch!r}, not a table")
    return ident


def _identifier(identifier: str | Identifier) -> Identifier:
    """The identifier of a table or branch this catalog serves: refuses system tables."""
    ident = Identifier.parse(identifier)
    if ident.branch is not None:
        validate_branch_name(ident.branch)
    if ident.is_system_table():
        raise UnsupportedError(
            f"table {ident.get_full_name()!r} names a system table, which this engine's catalog "
            f"does not serve yet; name the table itself ({ident.database}.{ident.table})")
    return ident


@dataclass(frozen=True)
class Database:
    """pypaimon's `Database`: a database's name and properties (none on a filesystem catalog)."""

    name: str
    options: dict[str, str] = field(default_factory=dict)
    comment: str | None = None


class Catalog:
    """The tables under one warehouse root (a local path or a pyarrow.fs URI)."""

    def __init__(self, warehouse: str, options: Mapping[str, str] | None = None):
        self.warehouse = warehouse
        self.options = dict(options or {})
        self.file_io, self.root = warehouse_file_io(warehouse, self.options)

    # ---- databases -----------------------------------------------------------
    def database_path(self, name: str) -> str:
        return f"{self.root}/{validate_name(name, 'database')}{DB_SUFFIX}"

    def list_databases(self) -> list[str]:
        return sorted(
            s.path.rsplit("/", 1)[-1][: -len(DB_SUFFIX)]
            for s in self.file_io.list_status(self.root)
            if s.is_dir and s.path.endswith(DB_SUFFIX)
        )

    def get_database(self, name: str) -> Database:
        """The database `name`; DatabaseNotExistError (a ValueError) when there is none."""
        if not self.database_exists(name):
            raise DatabaseNotExistError(f"database '{name}' does not exist in {self.warehouse}", name)
        return Database(name)

    def database_exists(self, name: str) -> bool:
        """Whether `<name>.db` exists in the warehouse (as Java's FileSystemCatalog asks); an error
        of the storage (permissions, network) is raised, not read as "no such database"."""
        return self.file_io.exists(self.database_path(name))

    def create_database(self, name: str, ignore_if_exists: bool = False,
                        properties: Mapping[str, str] | None = None) -> None:
        """Create a database directory; DatabaseAlreadyExistError unless `ignore_if_exists`."""
        path = self.database_path(name)
        if self.file_io.is_dir(path):
            if ignore_if_exists:
                return
            raise DatabaseAlreadyExistError(f"database '{name}' already exists in {self.warehouse}", name)
        self.file_io.mkdirs(path)

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        path = self.database_path(name)
        if not self.file_io.is_dir(path):
            if ignore_if_not_exists:
                return
            raise DatabaseNotExistError(f"database '{name}' does not exist in {self.warehouse}", name)
        if self.list_tables(name) and not cascade:
            raise DatabaseNotExistError(
                f"database '{name}' is not empty; drop its tables first or pass cascade=True")
        self.file_io.delete_dir(path)

    # ---- tables --------------------------------------------------------------
    def table_path(self, identifier: str | Identifier) -> str:
        ident = _identifier(identifier)
        return f"{self.database_path(ident.database)}/{ident.table}"

    def list_tables(self, database: str) -> list[str]:
        path = self.database_path(database)
        if not self.file_io.is_dir(path):
            raise DatabaseNotExistError(f"database '{database}' does not exist in {self.warehouse}", database)
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
        ident = _main_only(identifier, "create_table (use create_branch for a branch)")
        if not self.database_exists(ident.database):
            raise DatabaseNotExistError(
                f"database '{ident.database}' does not exist in {self.warehouse}; create it first",
                ident.database)
        table_schema = TableSchema.from_schema(schema)
        check_new_schema(table_schema)  # merge-engine options and file formats (from_schema checked the rest)
        path = self.table_path(ident)
        if self._schema_ids(path):
            if ignore_if_exists:
                return
            raise TableAlreadyExistError(f"table '{ident}' already exists", ident)
        paths = PathFactory(path)
        if not self.file_io.try_put_if_absent(paths.schema_path(0), table_schema.to_json().encode()):
            if ignore_if_exists:
                return
            raise TableAlreadyExistError(f"table '{ident}' already exists", ident)

    def get_table(self, identifier: str | Identifier) -> FileStoreTable:
        """Load a table at its latest schema; TableNotExistError when there is none, and
        InvalidOptionError when its stored start options conflict (Paimon refuses such a schema at
        load too; `alter_table` can still reset one of them)."""
        table = self._load_table(identifier)
        check_stored_startup_options(table.schema.options, str(table.identifier))
        return table

    def _load_table(self, identifier: str | Identifier) -> FileStoreTable:
        ident = _identifier(identifier)
        path = self.table_path(ident)
        main = ident.main_identifier()
        schemas = SchemaManager(self.file_io, PathFactory(path), main.full_name())
        ids = schemas.schema_ids()  # one listing: it tells both whether the table exists and its latest schema
        if not ids:
            raise TableNotExistError(f"table '{main}' does not exist in {self.warehouse}", main)
        table = FileStoreTable(self.file_io, main.full_name(), path, schemas.schema(ids[-1]))
        branch = ident.branch or table.options.get(BRANCH)
        if branch and branch != "main":
            try:
                # Not `branch_table`, which checks the stored start options: `get_table` checks
                # them, and `alter_table` opens the branch to mend them.
                table = FileStoreTable.of(table.store.for_branch(branch))
            except BranchNotExistError as exc:
                raise TableNotExistError(
                    f"table '{ident}' does not exist in {self.warehouse}: {exc}", ident) from exc
        table.identifier = ident
        return table

    def alter_table(self, identifier: str | Identifier, changes: Sequence[SchemaChange],
                    ignore_if_not_exists: bool = False) -> None:
        """Apply `changes` (pypaimon's `SchemaChange`s) as one new schema version, or none.

        Each change is checked against Paimon's rules first (docs/schema-evolution.md); a change
        that breaks one raises an error naming the column or option and nothing is written. Two
        concurrent alters: one writes the next `schema-N`, the other gets CommitConflictError.
        """
        try:
            table = self._load_table(identifier)
        except TableNotExistError:
            if ignore_if_not_exists:
                return
            raise
        table.schema_manager().commit_changes(list(changes), lambda: table.latest_snapshot() is not None)

    def drop_table(self, identifier: str | Identifier, ignore_if_not_exists: bool = False) -> None:
        ident = _main_only(identifier, "drop_table (use drop_branch for a branch)")
        path = self.table_path(ident)
        if not self._schema_ids(path):
            if ignore_if_not_exists:
                return
            raise TableNotExistError(f"table '{ident}' does not exist in {self.warehouse}", ident)
        self.file_io.delete_dir(path)

    def rename_table(self, source: str | Identifier, target: str | Identifier) -> None:
        """Rename table `source` to `target` (in the same or another database of this warehouse).

        The table directory is renamed in one step, so readers find the table under one name or
        the other, never half. Only on a file system that renames directories atomically (a
        local or mounted one): on object storage this raises UnsupportedError and changes
        nothing, as a copy-then-delete would expose a half-moved table.

        Raises:
            TableNotExistError: there is no table `source`.
            DatabaseNotExistError: the database of `target` does not exist.
            TableAlreadyExistError: `target` exists (as a table or any other directory).
        """
        src, dst = _identifier(source), _identifier(target)
        src_path, dst_path = self.table_path(src), self.table_path(dst)
        if not self._schema_ids(src_path):
            raise TableNotExistError(f"table '{src}' does not exist in {self.warehouse}", src)
        if not self.database_exists(dst.database):
            raise DatabaseNotExistError(
                f"cannot rename table '{src}' to '{dst}': database '{dst.database}' does not exist",
                dst.database)
        if self.file_io.exists(dst_path):
            raise TableAlreadyExistError(
                f"cannot rename table '{src}' to '{dst}': '{dst}' already exists", dst)
        if not getattr(self.file_io, "is_local", False):
            raise UnsupportedError(
                f"cannot rename table '{src}': {self.warehouse} is object storage, where a "
                f"directory cannot be renamed atomically; copy the table with Spark instead")
        with storage_errors(f"rename table '{src}' to '{dst}'", src_path):
            self.file_io.fs.move(src_path, dst_path)

    def truncate_table(self, identifier: str | Identifier) -> int | None:
        """Remove every row of a table in one OVERWRITE snapshot (earlier snapshots keep theirs);
        returns the snapshot id, or None when the table had no snapshot yet."""
        return self.get_table(identifier).truncate()

    def drop_partitions(self, identifier: str | Identifier,
                        partitions: Sequence[Mapping[str, object]]) -> int:
        """Remove every row of the given partitions (full or partial specs, `{"dt": "2026-11-21"}`)
        in one OVERWRITE snapshot; returns its id. Refuses an empty list (pypaimon does too)."""
        return self.get_table(identifier).drop_partitions(partitions)

    def list_partitions(self, identifier: str | Identifier) -> list[PartitionStatistics]:
        """Every partition of the table's latest snapshot with its record count, file count, size,
        buckets and last file creation time, sorted by partition spec."""
        return self.get_table(identifier).list_partitions()

    def list_partitions_paged(self, identifier: str | Identifier, max_results: int | None = None,
                              page_token: str | None = None,
                              partition_name_pattern: str | None = None) -> PagedList[PartitionStatistics]:
        """pypaimon's paged listing: `max_results` per page from `page_token` (the previous page's
        `next_page_token`), optionally only specs matching `partition_name_pattern` (`dt=2026*`)."""
        return page_partitions(self.list_partitions(identifier), max_results, page_token,
                               partition_name_pattern)

    # ---- branches (pypaimon's catalog calls) --------------------------------------------------
    def create_branch(self, identifier: str | Identifier, branch_name: str, tag_name: str | None = None) -> None:
        """Create branch `branch_name` of the table from tag `tag_name`, or empty when None."""
        self.get_table(identifier).create_branch(branch_name, tag_name)

    def drop_branch(self, identifier: str | Identifier, branch_name: str) -> None:
        """Delete branch `branch_name` of the table; BranchNotExistError when there is none."""
        self.get_table(identifier).drop_branch(branch_name)

    def rename_branch(self, identifier: str | Identifier, from_branch: str, to_branch: str) -> None:
        self.get_table(identifier).rename_branch(from_branch, to_branch)

    def fast_forward(self, identifier: str | Identifier, branch_name: str) -> None:
        """Make the table's main branch what branch `branch_name` is."""
        self.get_table(identifier).fast_forward(branch_name)

    def list_branches(self, identifier: str | Identifier) -> list[str]:
        """The table's branches other than main, sorted."""
        return self.get_table(identifier).list_branches()

    # ---- tags (pypaimon's catalog calls; each loads the table and calls its method) ---------
    def create_tag(self, identifier: str | Identifier, tag_name: str, snapshot_id: int | None = None,
                   time_retained: str | None = None, ignore_if_exists: bool = False) -> None:
        """Tag snapshot `snapshot_id` (the latest when None); TagAlreadyExistError unless
        `ignore_if_exists`."""
        self.get_table(identifier).create_tag(tag_name, snapshot_id, ignore_if_exists=ignore_if_exists,
                                              time_retained=time_retained)

    def get_tag(self, identifier: str | Identifier, tag_name: str) -> GetTagResponse:
        """Tag `tag_name`: its snapshot, creation time and retention; TagNotExistError when missing."""
        return get_tag_response(self.get_table(identifier).store, tag_name)

    def delete_tag(self, identifier: str | Identifier, tag_name: str) -> None:
        """Delete tag `tag_name`; TagNotExistError when there is none (as pypaimon's catalog)."""
        table = self.get_table(identifier)
        if not table.delete_tag(tag_name):
            raise TagNotExistError(f"tag {tag_name!r} of table {table.name} doesn't exist", tag_name)

    def replace_tag(self, identifier: str | Identifier, tag_name: str, snapshot_id: int | None = None,
                    time_retained: str | None = None) -> None:
        """Point existing tag `tag_name` at `snapshot_id` (the latest when None)."""
        self.get_table(identifier).replace_tag(tag_name, snapshot_id, time_retained)

    def rename_tag(self, identifier: str | Identifier, old_name: str, new_name: str) -> None:
        self.get_table(identifier).rename_tag(old_name, new_name)

    def list_tags_paged(self, identifier: str | Identifier, max_results: int | None = None,
                        page_token: str | None = None,
                        tag_name_prefix: str | None = None) -> PagedList[str]:
        """Tag names in order, `max_results` per page after `page_token` (the previous page's last
        name), optionally only those starting with `tag_name_prefix`."""
        names = sorted(self.get_table(identifier).list_tags())
        if tag_name_prefix:
            names = [n for n in names if n.startswith(tag_name_prefix)]
        if page_token:
            names = [n for n in names if n > page_token]
        if max_results is not None and 0 < max_results < len(names):
            return PagedList(names[:max_results], names[max_results - 1])
        return PagedList(names, None)


class CatalogFactory:
    """pypaimon-style entry point: `CatalogFactory.create({"warehouse": path})`."""

    @staticmethod
    def create(options: Mapping[str, Any]) -> Catalog:
        if "warehouse" not in options:
            raise InvalidIdentifierError("catalog options need 'warehouse' (a path or URI)")
        return Catalog(str(options["warehouse"]), {k: str(v) for k, v in options.items()})
