"""FileStoreTable: one Paimon table, its schema and the entry points to write, read and maintain it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse_engine.errors import SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.merge import MergeFunction, build_merge_function
from lakehouse_engine.options import DATA_FILE_PREFIX, MANIFEST_COMPRESSION, CoreOptions
from lakehouse_engine.partition import PartitionCodec
from lakehouse_engine.path_factory import PathFactory
from lakehouse_engine.schema import BucketMode, TableSchema
from lakehouse_engine.store.manifest_io import ManifestIO
from lakehouse_engine.store.snapshot_manager import SnapshotManager
from lakehouse_engine.store.tag_manager import TagManager

if TYPE_CHECKING:
    from lakehouse_engine.read.read_builder import ReadBuilder
    from lakehouse_engine.write.write_builder import BatchWriteBuilder, StreamWriteBuilder

SCAN_SNAPSHOT_ID = "scan.snapshot-id"
SCAN_TAG_NAME = "scan.tag-name"


class FileStoreTable:
    """A table in a warehouse; cheap to create, holds no open files."""

    def __init__(self, file_io: FileIO, name: str, path: str, schema: TableSchema):
        self.file_io = file_io
        self.name = name
        self.path = path
        self.schema = schema
        self.options = schema.core_options
        self.path_factory = PathFactory(path, self.options.require(DATA_FILE_PREFIX))
        self._partition_codec: PartitionCodec | None = None
        self._merge_function: MergeFunction | None = None

    # ---- components ------------------------------------------------------------------
    def partition_codec(self) -> PartitionCodec:
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

    def tag_manager(self) -> TagManager:
        return TagManager(self)

    def snapshot_manager(self) -> SnapshotManager:
        return SnapshotManager(self.file_io, self.path_factory, self.name)

    def manifest_io(self) -> ManifestIO:
        return ManifestIO(self.file_io, self.path_factory, self.partition_codec(), self.schema.id,
                          self.options.require(MANIFEST_COMPRESSION))

    # ---- pypaimon-style entry points --------------------------------------------------------
    def new_batch_write_builder(self) -> BatchWriteBuilder:
        from lakehouse_engine.write.write_builder import BatchWriteBuilder

        return BatchWriteBuilder(self)

    def new_stream_write_builder(self) -> StreamWriteBuilder:
        """A builder for a stream of commits with explicit, increasing commit identifiers."""
        from lakehouse_engine.write.write_builder import StreamWriteBuilder

        return StreamWriteBuilder(self)

    def new_read_builder(self) -> ReadBuilder:
        from lakehouse_engine.read.read_builder import ReadBuilder

        return ReadBuilder(self)

    def copy(self, dynamic_options: Mapping[str, str]) -> FileStoreTable:
        """The same table with extra options for this handle only (e.g. `scan.snapshot-id`)."""
        options = dict(self.schema.options)
        options.update({str(k): str(v) for k, v in dynamic_options.items()})
        CoreOptions(options).validate()  # a bad dynamic option fails here, naming the option
        return FileStoreTable(self.file_io, self.name, self.path, replace(self.schema, options=options))

    # ---- snapshots -----------------------------------------------------------------------
    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager().latest_snapshot()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.snapshot_manager().snapshot(snapshot_id)

    def snapshots(self) -> list[Snapshot]:
        sm = self.snapshot_manager()
        return [sm.snapshot(i) for i in sm.list_snapshot_ids()]

    def resolve_snapshot(self, snapshot_id: int | None = None, tag: str | None = None) -> Snapshot | None:
        """The snapshot a read sees: `snapshot_id`, a tag, the `scan.snapshot-id` / `scan.tag-name`
        options, else the latest."""
        tag = tag or self.schema.options.get(SCAN_TAG_NAME)
        if snapshot_id is None and tag:
            return self.tag_manager().get_or_throw(tag)
        if snapshot_id is None and SCAN_SNAPSHOT_ID in self.schema.options:
            snapshot_id = int(self.schema.options[SCAN_SNAPSHOT_ID])
        sm = self.snapshot_manager()
        if snapshot_id is None:
            return sm.latest_snapshot()
        if snapshot_id <= 0:
            raise SnapshotNotExistError(f"snapshot id {snapshot_id} of table {self.name} is not valid")
        return sm.snapshot(snapshot_id)

    # ---- maintenance (Paimon's procedures, one method each) ---------------------------------
    def compact(self, full: bool = False, partitions: list[dict[str, Any]] | None = None) -> list[int]:
        """Compact buckets (all, or those of `partitions`); commits COMPACT snapshots, returns their ids."""
        from lakehouse_engine.compact.table_compact import compact_table

        return compact_table(self, full=full, partitions=partitions)

    def rescale(self, bucket_num: int, partitions: list[dict[str, Any]] | None = None) -> list[int]:
        """Rewrite partitions (all when None) into `bucket_num` buckets as one OVERWRITE snapshot."""
        from lakehouse_engine.maintenance.rescale import rescale

        return rescale(self, bucket_num, partitions)

    def bucket_stats(self, snapshot_id: int | None = None) -> pa.Table:
        """One row per (partition, bucket): records, files, sorted runs, levels, bytes (manifests only)."""
        from lakehouse_engine.compact.stats import bucket_stats

        return bucket_stats(self, snapshot_id)

    def expire_snapshots(self, retain_max: int | None = None, retain_min: int | None = None,
                         older_than: int | None = None, max_deletes: int | None = None) -> int:
        """Expire old snapshots and the files only they reference; returns how many expired.

        `older_than` is epoch milliseconds; unset arguments come from the `snapshot.*` options.
        """
        from lakehouse_engine.maintenance.expire import expire_snapshots

        return expire_snapshots(self, retain_max=retain_max, retain_min=retain_min,
                                older_than=older_than, max_deletes=max_deletes)

    def expire_after_commit(self) -> None:
        """What a commit of this table runs once it landed: expire snapshots past the retention
        options. Best effort: a failure is logged, never raised (the commit has landed)."""
        from lakehouse_engine.maintenance.expire import expire_after_commit

        expire_after_commit(self)

    def create_tag(self, name: str, snapshot_id: int | None = None) -> None:
        """Keep snapshot `snapshot_id` (the latest when None) under `name`."""
        from lakehouse_engine.maintenance.tags import create_tag

        create_tag(self, name, snapshot_id)

    def delete_tag(self, name: str) -> None:
        from lakehouse_engine.maintenance.tags import delete_tag

        delete_tag(self, name)

    def tags(self) -> dict[str, Snapshot]:
        """Tag name -> the snapshot it keeps."""
        return self.tag_manager().list_tags()

    def rollback_to(self, snapshot_or_tag: int | str) -> None:
        """Make a snapshot (by id) or a tag (by name) the latest again; later snapshots go."""
        from lakehouse_engine.maintenance.rollback import rollback_to

        rollback_to(self, snapshot_or_tag)

    def remove_orphan_files(self, older_than: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete files no snapshot or tag references, older than `older_than` (epoch ms; default 1 day ago)."""
        from lakehouse_engine.maintenance.orphans import remove_orphan_files

        return remove_orphan_files(self, older_than=older_than, dry_run=dry_run)

    def __repr__(self) -> str:
        return f"FileStoreTable({self.name!r}, {self.path!r})"
