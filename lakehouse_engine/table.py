"""FileStoreTable: one Paimon table, its schema and the entry points to write, read and maintain it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse_engine.errors import SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.options import CoreOptions
from lakehouse_engine.options.startup import check_stored_startup_options
from lakehouse_engine.path_factory import MAIN_BRANCH, PathFactory
from lakehouse_engine.schema import BucketMode, DataField, TableSchema
from lakehouse_engine.store.file_store import FileStore
from lakehouse_engine.store.schema_manager import SchemaManager
from lakehouse_engine.store.snapshot_manager import SnapshotManager

#: The option naming the branch a table handle reads and writes (Paimon's `branch`).
BRANCH_OPTION = "branch"

if TYPE_CHECKING:
    from lakehouse_engine.maintenance.branches import BranchManager
    from lakehouse_engine.maintenance.partitions import PartitionStatistics
    from lakehouse_engine.maintenance.tags import TagManager
    from lakehouse_engine.read.read_builder import ReadBuilder
    from lakehouse_engine.read.stream_read_builder import StreamReadBuilder
    from lakehouse_engine.store.consumer_manager import ConsumerManager
    from lakehouse_engine.write.postpone_fixed import PostponeFixedBucketWriteBuilder
    from lakehouse_engine.write.write_builder import BatchWriteBuilder, StreamWriteBuilder



class FileStoreTable:
    """A table in a warehouse, the user's facade over its `FileStore` (`table.store`): builders,
    snapshots, tags and one method per procedure. Cheap to create, holds no open files."""

    def __init__(self, file_io: FileIO, name: str, path: str, schema: TableSchema,
                 branch: str = MAIN_BRANCH):
        self.store = FileStore(file_io, name, path, schema, branch)
        #: The catalog's Identifier of this table (set by `Catalog.get_table`), pypaimon's `identifier`.
        self.identifier: Any = None

    @classmethod
    def of(cls, store: FileStore, identifier: Any = None) -> FileStoreTable:
        """The facade over an existing store."""
        table = cls.__new__(cls)
        table.store = store
        table.identifier = identifier
        return table

    # ---- what the table is ---------------------------------------------------------------------
    @property
    def file_io(self) -> FileIO:
        return self.store.file_io

    @property
    def name(self) -> str:
        return self.store.name

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def schema(self) -> TableSchema:
        return self.store.schema

    @property
    def options(self) -> CoreOptions:
        return self.store.options

    @property
    def path_factory(self) -> PathFactory:
        return self.store.path_factory

    @property
    def dynamic_options(self) -> dict[str, str]:
        """Options given to `copy` for this handle only; they carry over to `at_schema`."""
        return self.store.dynamic_options

    @property
    def branch(self) -> str:
        """The branch this handle reads and writes (`main` unless chosen)."""
        return self.store.branch

    # ---- pypaimon's attribute names -----------------------------------------------------------
    @property
    def table_schema(self) -> TableSchema:
        """pypaimon's name for `schema` (which can also be called: `table.schema()`)."""
        return self.schema

    @property
    def table_path(self) -> str:
        return self.path

    @property
    def fields(self) -> list[DataField]:
        return list(self.schema.fields)

    @property
    def field_names(self) -> list[str]:
        return self.schema.field_names

    @property
    def primary_keys(self) -> list[str]:
        return list(self.schema.primary_keys)

    @property
    def partition_keys(self) -> list[str]:
        return list(self.schema.partition_keys)

    @property
    def trimmed_primary_keys(self) -> list[str]:
        return self.schema.trimmed_primary_keys

    @property
    def field_dict(self) -> dict[str, DataField]:
        """pypaimon's `table.field_dict`: each field by its name."""
        return {f.name: f for f in self.schema.fields}

    @property
    def primary_keys_fields(self) -> list[DataField]:
        """pypaimon's `table.primary_keys_fields`: the primary key's fields, in key order."""
        return [self.schema.field(n) for n in self.schema.primary_keys]

    @property
    def partition_keys_fields(self) -> list[DataField]:
        """pypaimon's `table.partition_keys_fields`: the partition fields, in partition order."""
        return [self.schema.field(n) for n in self.schema.partition_keys]

    @property
    def trimmed_primary_keys_fields(self) -> list[DataField]:
        """pypaimon's `table.trimmed_primary_keys_fields`: the key fields that are not partition
        fields (the fields of a data file's key statistics)."""
        return [self.schema.field(n) for n in self.schema.trimmed_primary_keys]

    @property
    def is_primary_key_table(self) -> bool:
        return self.schema.has_primary_key

    @property
    def total_buckets(self) -> int:
        return self.options.bucket

    def bucket_mode(self) -> BucketMode:
        """How rows find their bucket: fixed, dynamic, cross-partition, unaware or postpone."""
        return self.store.bucket_mode()

    def snapshot_manager(self) -> SnapshotManager:
        """pypaimon's SnapshotManager of this table."""
        return self.store.snapshot_manager()

    def schema_manager(self) -> SchemaManager:
        """pypaimon's SchemaManager of this table."""
        return self.store.schema_manager()

    # ---- pypaimon-style entry points --------------------------------------------------------
    def new_batch_write_builder(self) -> BatchWriteBuilder:
        from lakehouse_engine.write.write_builder import BatchWriteBuilder

        return BatchWriteBuilder(self.store, expire=self.expire_after_commit)

    def new_postpone_fixed_bucket_write_builder(self) -> PostponeFixedBucketWriteBuilder:
        """pypaimon's builder for a batch write into a postpone-bucket table (`bucket` = -2): the
        rows go straight to fixed buckets and read at once (`write/postpone_fixed.py`; with
        `postpone.batch-write-fixed-bucket` = false, to the postpone bucket). Raises SchemaError
        on a table that is not in postpone bucket mode.
        """
        from lakehouse_engine.write.postpone_fixed import PostponeFixedBucketWriteBuilder

        return PostponeFixedBucketWriteBuilder(self.store, expire=self.expire_after_commit)

    def new_stream_write_builder(self) -> StreamWriteBuilder:
        """A builder for a stream of commits with explicit, increasing commit identifiers."""
        from lakehouse_engine.write.write_builder import StreamWriteBuilder

        return StreamWriteBuilder(self.store, expire=self.expire_after_commit)

    def new_read_builder(self) -> ReadBuilder:
        from lakehouse_engine.read.read_builder import ReadBuilder

        return ReadBuilder(self.store)

    def new_stream_read_builder(self) -> StreamReadBuilder:
        """A builder for a streaming read of this table's changes (pypaimon's StreamReadBuilder)."""
        from lakehouse_engine.read.stream_read_builder import StreamReadBuilder

        return StreamReadBuilder(self.store)

    def changes(self, start_snapshot: int, end_snapshot: int | None = None, mode: str | None = None) -> pa.Table:
        """The changes of snapshots start_snapshot+1 .. end_snapshot (default: latest) as stored,
        in snapshot order, with `_snapshot_id` and `_row_kind` (+I, -U, +U, -D) before the fields;
        `mode` 'delta' or 'changelog' (default: changelog when the table has a producer)."""
        from lakehouse_engine.read.changes import read_changes

        return read_changes(self.store, start_snapshot, end_snapshot, mode)

    def consumer_manager(self) -> ConsumerManager:
        """The consumers of this table: streaming readers' recorded positions (pypaimon's name)."""
        return self.store.consumer_manager()

    def copy(self, dynamic_options: Mapping[str, str]) -> FileStoreTable:
        """The same table with extra options for this handle only (e.g. `scan.snapshot-id`);
        the `branch` option switches to that branch (BranchNotExistError when there is none)."""
        options = {str(k): str(v) for k, v in dynamic_options.items()}
        branch = options.pop(BRANCH_OPTION, None)
        store = self.store if branch is None else _checked_branch(self.store, branch)
        return FileStoreTable.of(store.copy(options) if options else store, self.identifier)

    # ---- branches ----------------------------------------------------------------------------
    def branch_manager(self) -> BranchManager:
        """pypaimon's BranchManager of this table: create, drop, rename, fast-forward, list."""
        from lakehouse_engine.maintenance.branches import BranchManager

        return BranchManager(self.store)

    def create_branch(self, name: str, tag_name: str | None = None, ignore_if_exists: bool = False) -> None:
        """Create branch `name` from tag `tag_name`, or empty (main's schema) when None."""
        self.branch_manager().create_branch(name, tag_name, ignore_if_exists)

    def drop_branch(self, name: str) -> None:
        """Delete branch `name`; files only it referenced go at the next orphan removal."""
        self.branch_manager().drop_branch(name)

    def rename_branch(self, from_name: str, to_name: str) -> None:
        self.branch_manager().rename_branch(from_name, to_name)

    def fast_forward(self, name: str) -> None:
        """Make main what branch `name` is (Paimon's fast-forward)."""
        self.branch_manager().fast_forward(name)

    def rebase_appends(self, source_branch: str, after: int) -> list[int]:
        """Write to this table (a branch made at main's latest) the records branch `source_branch`
        appended after snapshot `after`, committed as their commit user and identifier (once:
        idempotent); the snapshot ids committed (docs/branches.md)."""
        from lakehouse_engine.maintenance.rebase import rebase_appends

        return rebase_appends(self.store, self.store.for_branch(source_branch), after)

    def list_branches(self) -> list[str]:
        """The table's branches other than main, sorted."""
        return self.store.branches()

    def branch_table(self, name: str) -> FileStoreTable:
        """This table's branch `name` (`main` for main) as a table to read and write;
        InvalidOptionError when the branch stores conflicting start options, as
        `catalog.get_table("db.t$branch_<name>")` refuses it."""
        return FileStoreTable.of(_checked_branch(self.store, name), self.identifier)

    def at_schema(self, schema_id: int) -> FileStoreTable:
        """This table as schema version `schema_id` saw it (fields, keys, options), for reading a
        snapshot made under that version; this handle's dynamic options still apply."""
        store = self.store.at_schema(schema_id)
        return self if store is self.store else FileStoreTable.of(store, self.identifier)

    # ---- snapshots -----------------------------------------------------------------------
    def latest_snapshot(self) -> Snapshot | None:
        return self.store.latest_snapshot()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.store.snapshot(snapshot_id)

    def snapshots(self) -> list[Snapshot]:
        sm = self.snapshot_manager()
        return [sm.snapshot(i) for i in sm.list_snapshot_ids()]

    def resolve_snapshot(self, snapshot_id: int | None = None, tag: str | None = None) -> Snapshot | None:
        """The snapshot a read sees: `snapshot_id`, a tag, the `scan.snapshot-id` / `scan.tag-name`
        options, else the latest."""
        return self.store.resolve_snapshot(snapshot_id, tag)

    # ---- maintenance (Paimon's procedures, one method each) ---------------------------------
    def compact(self, full: bool = False, partitions: list[dict[str, Any]] | None = None,
                level0_only: bool = False) -> list[int]:
        """Compact buckets (all, or those of `partitions`); commits COMPACT snapshots, returns their ids.
        `level0_only`: only take each bucket's level 0 up into one new sorted run at a free level
        (no run merged; a `lookup` table's gives the changelog of that level 0, and a `lookup`
        partial-update/aggregation table's merges the files above level 0 it overlaps)."""
        from lakehouse_engine.compact.table_compact import compact_table

        return compact_table(self.store, full=full, partitions=partitions, expire=self.expire_after_commit,
                             level0_only=level0_only)

    def compact_postpone(self, partitions: list[dict[str, Any]] | None = None) -> list[int]:
        """Move the rows of a postpone-bucket table ('bucket' = -2) waiting in bucket-postpone
        (of `partitions`, or all) into real buckets, one COMPACT snapshot; no other compaction."""
        from lakehouse_engine.compact.postpone import compact_postpone

        return compact_postpone(self.store, partitions, expire=self.expire_after_commit)

    def rescale(self, bucket_num: int, partitions: list[dict[str, Any]] | None = None) -> list[int]:
        """Rewrite partitions (all when None) into `bucket_num` buckets as one OVERWRITE snapshot."""
        from lakehouse_engine.maintenance.rescale import rescale

        return rescale(self.store, bucket_num, partitions)

    def bucket_stats(self, snapshot_id: int | None = None) -> pa.Table:
        """One row per (partition, bucket): records, files, sorted runs, levels, bytes (manifests only)."""
        from lakehouse_engine.stats import bucket_stats

        return bucket_stats(self.store, snapshot_id)

    # ---- what the table holds (manifests only; lakehouse_engine.stats) ----------------------
    def index_stats(self, snapshot_id: int | None = None) -> pa.Table:
        """One row per live index file (partition, bucket, index_type, file_name, row_count,
        file_size); a dynamic-bucket table's HASH files count the keys of each bucket."""
        from lakehouse_engine.stats import index_stats

        return index_stats(self.store, snapshot_id)

    def files_added(self, snapshot_ids: list[int]) -> pa.Table:
        """The data files these snapshots added: snapshot_id, partition, bucket, file_name,
        level, row_count, file_size."""
        from lakehouse_engine.stats import files_added

        return files_added(self.store, snapshot_ids)

    def committed_snapshots(self, commit_user: str, commit_identifier: int | None = None) -> list[int]:
        """The snapshot ids a commit of `commit_user` landed as, oldest first; empty when it did
        not land. `commit_identifier` defaults to a batch commit's (Long.MAX_VALUE)."""
        from lakehouse_engine.stats import committed_snapshots
        from lakehouse_engine.write.table_commit import BATCH_COMMIT_IDENTIFIER

        ident = BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier
        return committed_snapshots(self.store, commit_user, ident)

    def preview_buckets(self, data: pa.Table) -> pa.Int32Array:
        """The bucket each row of `data` would be written to now (as a batch write assigns it:
        the fixed-bucket hash, the dynamic-bucket index, -2 for postpone, 0 for bucket-unaware),
        with nothing written. Rows must have the table's columns."""
        write = self.new_batch_write_builder().new_write()
        try:
            return write.preview_buckets(data)
        finally:
            write.close()

    def expire_snapshots(self, retain_max: int | None = None, retain_min: int | None = None,
                         older_than: int | None = None, max_deletes: int | None = None) -> int:
        """Expire old snapshots and the files only they reference; returns how many expired.

        `older_than` is epoch milliseconds; unset arguments come from the `snapshot.*` options.
        """
        from lakehouse_engine.maintenance.expire import expire_snapshots

        return expire_snapshots(self.store, retain_max=retain_max, retain_min=retain_min,
                                older_than=older_than, max_deletes=max_deletes)

    def expire_changelogs(self) -> int:
        """Expire the long-lived changelogs (`changelog/`) past the `changelog.*` retention
        options; returns how many expired (Paimon's ExpireChangelogImpl)."""
        from lakehouse_engine.maintenance.expire_changelog import expire_changelogs

        return expire_changelogs(self.store)

    def expire_after_commit(self) -> None:
        """What a commit of this table runs once it landed: expire snapshots past the retention
        options. Best effort: a failure is logged, never raised (the commit has landed)."""
        from lakehouse_engine.maintenance.expire import expire_after_commit

        expire_after_commit(self.store)

    def create_tag(self, name: str, snapshot_id: int | None = None, ignore_if_exists: bool = False,
                   time_retained: str | None = None) -> None:
        """Keep snapshot `snapshot_id` (the latest when None) under `name` (pypaimon's signature).

        TagAlreadyExistError (a ValueError) when the tag exists, unless `ignore_if_exists`;
        `time_retained` (`1 d`, `12h`) records a retention in the tag file as Paimon does.
        """
        from lakehouse_engine.maintenance.tags import create_tag

        create_tag(self.store, name, snapshot_id, ignore_if_exists=ignore_if_exists, time_retained=time_retained)

    def delete_tag(self, name: str) -> bool:
        """Delete tag `name` (and files only it kept); False when there is no such tag (pypaimon)."""
        from lakehouse_engine.maintenance.tags import TagNotExistError, delete_tag

        try:
            delete_tag(self.store, name)
        except TagNotExistError:
            return False
        return True

    def replace_tag(self, name: str, snapshot_id: int | None = None, time_retained: str | None = None) -> None:
        """Point existing tag `name` at `snapshot_id` (the latest when None); TagNotExistError if none."""
        from lakehouse_engine.maintenance.tags import replace_tag

        replace_tag(self.store, name, snapshot_id, time_retained)

    def rename_tag(self, old_name: str, new_name: str) -> None:
        """Rename a tag; TagNotExistError / TagAlreadyExistError (both ValueErrors) name the problem."""
        from lakehouse_engine.maintenance.tags import rename_tag

        rename_tag(self.store, old_name, new_name)

    def tags(self) -> dict[str, Snapshot]:
        """Tag name -> the snapshot it keeps."""
        return self.store.tags()

    def list_tags(self) -> list[str]:
        """The tag names, sorted (pypaimon's `list_tags`; `tags()` also gives their snapshots)."""
        return list(self.tags())

    def tag_manager(self) -> TagManager:
        """pypaimon's TagManager of this table."""
        from lakehouse_engine.maintenance.tags import TagManager

        return TagManager(self.store)

    # ---- partitions --------------------------------------------------------------------------
    def list_partitions(self) -> list[PartitionStatistics]:
        """Partitions of the latest snapshot with rows, files, bytes, buckets and last file time."""
        from lakehouse_engine.maintenance.partitions import list_partitions

        return list_partitions(self.store)

    def drop_partitions(self, partitions: Sequence[Mapping[str, object]]) -> int:
        """Delete every row of `partitions` in one OVERWRITE snapshot; returns its id."""
        from lakehouse_engine.maintenance.partitions import drop_partitions

        return drop_partitions(self.store, partitions)

    def truncate(self) -> int | None:
        """Delete every row in one OVERWRITE snapshot; its id (None when there is no snapshot)."""
        from lakehouse_engine.maintenance.partitions import truncate

        return truncate(self.store)

    def rollback_to(self, snapshot_or_tag: int | str) -> None:
        """Make a snapshot (by id) or a tag (by name) the latest again; later snapshots go."""
        from lakehouse_engine.maintenance.rollback import rollback_to

        rollback_to(self.store, snapshot_or_tag)

    def rollback_to_timestamp(self, timestamp_millis: int) -> int:
        """Roll back to the newest snapshot committed at or before `timestamp_millis` (epoch ms);
        returns its id. SnapshotNotExistError (a ValueError) when every snapshot is newer."""
        target = self.snapshot_manager().earlier_or_equal_time_mills(timestamp_millis)
        if target is None:
            raise SnapshotNotExistError(
                f"cannot roll back table {self.name} to {timestamp_millis}: no retained snapshot was "
                f"committed at or before it")
        self.rollback_to(target.id)
        return target.id

    def remove_orphan_files(self, older_than: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete files no snapshot or tag references, older than `older_than` (epoch ms; default 1 day ago)."""
        from lakehouse_engine.maintenance.orphans import remove_orphan_files

        return remove_orphan_files(self.store, older_than=older_than, dry_run=dry_run)

    def __repr__(self) -> str:
        return f"FileStoreTable({self.name!r}, {self.path!r})"


def _checked_branch(store: FileStore, name: str) -> FileStore:
    """`store.for_branch(name)`, refused (InvalidOptionError naming the branch and the options)
    when the branch's stored schema holds conflicting start options, as every open of a table
    refuses them (`check_stored_startup_options`; `alter_table` on `db.t$branch_<name>` mends it)."""
    branch = store.for_branch(name)
    if branch is not store:
        stored = branch.schema_by_id(branch.schema.id) if branch.dynamic_options else branch.schema
        check_stored_startup_options(stored.options, branch.name)
    return branch
