"""FileStore: one table's files and the objects that read and write them, beneath the user facade.

Every layer under the `FileStoreTable` facade (read, write, bucket, compact, maintenance, stats)
takes a `FileStore`: the table's name, schema and options, its FileIO and paths, and the
components built from them once (partition codec, merge function, manifest IO, snapshot and
schema managers, the data file reader). A store belongs to one branch: its snapshots, schemas and
tags live under the branch's directory, its data and manifest files in the table directory that
every branch shares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from lakehouse_engine.errors import CorruptFileError, LakehouseError, SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.evolution import EvolvingFileReader
from lakehouse_engine.mergetree.merge import MergeFunction, build_merge_function
from lakehouse_engine.options import (
    DATA_FILE_PREFIX,
    MANIFEST_COMPRESSION,
    SCAN_SNAPSHOT_ID,
    SCAN_TAG_NAME,
    CoreOptions,
)
from lakehouse_engine.options.support import check_supported
from lakehouse_engine.partition import PartitionCodec
from lakehouse_engine.path_factory import BRANCH_PREFIX, MAIN_BRANCH, PathFactory
from lakehouse_engine.schema import BucketMode, TableSchema
from lakehouse_engine.store.consumer_manager import ConsumerManager
from lakehouse_engine.store.manifest_io import ManifestIO
from lakehouse_engine.store.schema_manager import SchemaManager
from lakehouse_engine.store.snapshot_manager import SnapshotManager
from lakehouse_engine.store.tag_files import list_tags, tag_snapshot

T = TypeVar("T")
#: Reads of the latest snapshot that an expiry may overtake, before one error is final.
_LATEST_READ_ATTEMPTS = 20


class BranchNotExistError(LakehouseError, ValueError):
    """The named branch of a table does not exist (a ValueError, as pypaimon raises)."""


def branch_display_name(table_name: str, branch: str) -> str:
    """The name of a table's branch as Paimon spells it: `db.t` for main, `db.t$branch_<name>`."""
    return table_name if branch == MAIN_BRANCH else f"{table_name}$branch_{branch}"


class FileStore:
    """A table's files on one branch: what every engine layer below the facade works with.

    Cheap to create and holds no open files; the components it hands out are built on demand
    (the partition codec, merge function and schema versions once per store).
    """

    def __init__(self, file_io: FileIO, name: str, path: str, schema: TableSchema,
                 branch: str = MAIN_BRANCH):
        self.file_io = file_io
        #: The table's name without the branch (`db.t`); `name` adds the branch (`db.t$branch_b`).
        self.table_name = name
        self.name = branch_display_name(name, branch)
        #: The table directory: data, manifest and index files of every branch.
        self.path = path
        self.branch = branch
        self.schema = schema
        self.options = schema.core_options
        self.path_factory = PathFactory(path, self.options.require(DATA_FILE_PREFIX), branch)
        #: Options given to `copy` for this handle only; they carry over to `at_schema`.
        self.dynamic_options: dict[str, str] = {}
        self._partition_codec: PartitionCodec | None = None
        self._merge_function: MergeFunction | None = None
        self._schemas: dict[int, TableSchema] = {schema.id: schema}

    # ---- components --------------------------------------------------------------------------
    def partition_codec(self) -> PartitionCodec:
        """Partition values as Paimon's BinaryRow and as directory names, for this schema."""
        if self._partition_codec is None:
            self._partition_codec = PartitionCodec(self.schema)
        return self._partition_codec

    def bucket_mode(self) -> BucketMode:
        """How rows find their bucket: fixed, dynamic, cross-partition, unaware or postpone."""
        return self.schema.bucket_mode

    def merge_function(self) -> MergeFunction:
        """How records of one key merge in this table: one object, built once, used by writes,
        reads and compaction alike."""
        if self._merge_function is None:
            self._merge_function = build_merge_function(
                self.options, self.schema.trimmed_primary_keys, self.schema.primary_keys)
        return self._merge_function

    def snapshot_manager(self) -> SnapshotManager:
        """The branch's snapshots (`snapshot-N` and the LATEST/EARLIEST hints)."""
        return SnapshotManager(self.file_io, self.path_factory, self.name)

    def schema_manager(self) -> SchemaManager:
        """The branch's schema versions (`schema-N`)."""
        return SchemaManager(self.file_io, self.path_factory, self.name)

    def schema_by_id(self, schema_id: int) -> TableSchema:
        """Schema version `schema_id` (the one data files of that version were written with),
        read once per store."""
        found = self._schemas.get(schema_id)
        if found is None:
            found = self._schemas[schema_id] = self.schema_manager().schema(schema_id)
        return found

    def file_reader(self, for_rewrite: bool = False) -> EvolvingFileReader:
        """Reads this table's data files of any schema version as columns of `self.schema`."""
        return EvolvingFileReader(self.file_io, self.schema, self.schema_by_id, self.name, for_rewrite)

    def consumer_manager(self) -> ConsumerManager:
        """The consumers of this branch (`consumer/` under its metadata root)."""
        return ConsumerManager(self.file_io, self.path_factory.metadata_path, self.name)

    def manifest_io(self) -> ManifestIO:
        """Reads and writes manifests, manifest lists and index manifests of this table."""
        return ManifestIO(self.file_io, self.path_factory, self.partition_codec(), self.schema.id,
                          self.options.require(MANIFEST_COMPRESSION))

    # ---- snapshots and tags ------------------------------------------------------------------
    def latest_snapshot(self) -> Snapshot | None:
        """The branch's newest snapshot, None when it has none."""
        return self.snapshot_manager().latest_snapshot()

    def read_latest(self, read: Callable[[Snapshot | None], T]) -> T:
        """`read(latest snapshot)`, again on the new latest when an expiry deleted the snapshot's
        metadata while it was being read (many commits landed meanwhile: not damage). Metadata
        missing from a snapshot that still exists is damage, and raises."""
        sm = self.snapshot_manager()
        for _ in range(_LATEST_READ_ATTEMPTS - 1):
            latest = sm.latest_snapshot()
            try:
                return read(latest)
            except CorruptFileError:
                if latest is None or sm.snapshot_exists(latest.id):
                    raise
        return read(sm.latest_snapshot())

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot `snapshot_id`; SnapshotNotExistError when it does not exist."""
        return self.snapshot_manager().snapshot(snapshot_id)

    def tags(self) -> dict[str, Snapshot]:
        """Tag name -> the snapshot it keeps, sorted by name."""
        return list_tags(self)

    def resolve_snapshot(self, snapshot_id: int | None = None, tag: str | None = None) -> Snapshot | None:
        """The snapshot a read sees: `snapshot_id`, a tag, the `scan.snapshot-id` / `scan.tag-name`
        options, else the latest."""
        tag = tag or self.options.get(SCAN_TAG_NAME)
        if snapshot_id is None and tag:
            return tag_snapshot(self, tag)
        if snapshot_id is None:
            snapshot_id = self.options.get(SCAN_SNAPSHOT_ID)
        sm = self.snapshot_manager()
        if snapshot_id is None:
            # A batch read under `scan.mode` from-timestamp or compacted-full (Paimon's static
            # starting scanners): the snapshot at that time, or the latest compaction's.
            from lakehouse_engine.store.scan_start import batch_snapshot

            chosen, snapshot = batch_snapshot(self)
            return snapshot if chosen else sm.latest_snapshot()
        if snapshot_id <= 0:
            raise SnapshotNotExistError(f"snapshot id {snapshot_id} of table {self.name} is not valid")
        return sm.snapshot(snapshot_id)

    # ---- other views of the same files --------------------------------------------------------
    def copy(self, dynamic_options: dict[str, str]) -> FileStore:
        """The same store with extra options for this handle only (e.g. `scan.snapshot-id`)."""
        extra = {str(k): str(v) for k, v in dynamic_options.items()}
        options = {**self.schema.options, **extra}
        check_supported(options, extra)  # a refused option or a near-miss key, named
        CoreOptions(options).validate()  # a bad dynamic option fails here, naming the option
        store = self._sibling(replace(self.schema, options=options))
        store.dynamic_options = {**self.dynamic_options, **extra}
        store._schemas.update({i: s for i, s in self._schemas.items() if i != self.schema.id})
        return store

    def at_schema(self, schema_id: int) -> FileStore:
        """This store as schema version `schema_id` saw it (fields, keys, options), for reading a
        snapshot made under that version; this handle's dynamic options still apply."""
        if schema_id == self.schema.id:
            return self
        old = self.schema_by_id(schema_id)
        store = self._sibling(replace(old, options={**old.options, **self.dynamic_options}))
        store.dynamic_options = dict(self.dynamic_options)
        store._schemas.update({i: s for i, s in self._schemas.items() if i != schema_id})
        return store

    def _sibling(self, schema: TableSchema) -> FileStore:
        return FileStore(self.file_io, self.table_name, self.path, schema, self.branch)

    # ---- branches ----------------------------------------------------------------------------
    def branches(self) -> list[str]:
        """The names of the table's branches other than main, sorted (`branch/branch-<name>/`)."""
        names = self.file_io.list_names(f"{self.path_factory.table_path}/branch")
        return sorted(n[len(BRANCH_PREFIX):] for n in names
                      if n.startswith(BRANCH_PREFIX) and len(n) > len(BRANCH_PREFIX))

    def for_branch(self, branch: str) -> FileStore:
        """The store of branch `branch` of this table at the branch's latest schema (this
        store's dynamic options carry over); BranchNotExistError when it has none."""
        if branch == self.branch:
            return self
        paths = PathFactory(self.path, branch=branch)
        ids = SchemaManager(self.file_io, paths, self.table_name).schema_ids()
        if not ids:
            raise BranchNotExistError(
                f"branch {branch!r} of table {self.table_name} does not exist "
                f"(branches: {', '.join(['main', *self.branches()])})")
        schema = SchemaManager(self.file_io, paths, self.table_name).schema(ids[-1])
        if self.dynamic_options:
            schema = replace(schema, options={**schema.options, **self.dynamic_options})
        store = FileStore(self.file_io, self.table_name, self.path, schema, branch)
        store.dynamic_options = dict(self.dynamic_options)
        return store

    def __repr__(self) -> str:
        return f"FileStore({self.name!r}, {self.path!r}, branch={self.branch!r})"
