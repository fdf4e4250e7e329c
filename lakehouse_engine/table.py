"""FileStoreTable: one Paimon table, its schema and the entry points to write, read and maintain it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from lakehouse_engine.errors import SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.manifest_io import ManifestIO
from lakehouse_engine.options import DATA_FILE_PREFIX, MANIFEST_COMPRESSION
from lakehouse_engine.partition import PartitionCodec
from lakehouse_engine.path_factory import PathFactory
from lakehouse_engine.schema import TableSchema
from lakehouse_engine.snapshot_manager import SnapshotManager

if TYPE_CHECKING:
    from lakehouse_engine.read.read_builder import ReadBuilder
    from lakehouse_engine.write.write_builder import BatchWriteBuilder

SCAN_SNAPSHOT_ID = "scan.snapshot-id"


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

    # ---- components ------------------------------------------------------------------
    def partition_codec(self) -> PartitionCodec:
        if self._partition_codec is None:
            self._partition_codec = PartitionCodec(self.schema)
        return self._partition_codec

    def snapshot_manager(self) -> SnapshotManager:
        return SnapshotManager(self.file_io, self.path_factory, self.name)

    def manifest_io(self) -> ManifestIO:
        return ManifestIO(self.file_io, self.path_factory, self.partition_codec(), self.schema.id,
                          self.options.require(MANIFEST_COMPRESSION))

    # ---- pypaimon-style entry points --------------------------------------------------------
    def new_batch_write_builder(self) -> BatchWriteBuilder:
        from lakehouse_engine.write.write_builder import BatchWriteBuilder

        return BatchWriteBuilder(self)

    def new_read_builder(self) -> ReadBuilder:
        from lakehouse_engine.read.read_builder import ReadBuilder

        return ReadBuilder(self)

    def copy(self, dynamic_options: Mapping[str, str]) -> FileStoreTable:
        """The same table with extra options for this handle only (e.g. `scan.snapshot-id`)."""
        options = dict(self.schema.options)
        options.update({str(k): str(v) for k, v in dynamic_options.items()})
        return FileStoreTable(self.file_io, self.name, self.path, replace(self.schema, options=options))

    # ---- snapshots -----------------------------------------------------------------------
    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager().latest_snapshot()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.snapshot_manager().snapshot(snapshot_id)

    def snapshots(self) -> list[Snapshot]:
        sm = self.snapshot_manager()
        return [sm.snapshot(i) for i in sm.list_snapshot_ids()]

    def resolve_snapshot(self, snapshot_id: int | None = None) -> Snapshot | None:
        """The snapshot a read sees: `snapshot_id`, else the `scan.snapshot-id` option, else the latest."""
        if snapshot_id is None and SCAN_SNAPSHOT_ID in self.schema.options:
            snapshot_id = int(self.schema.options[SCAN_SNAPSHOT_ID])
        sm = self.snapshot_manager()
        if snapshot_id is None:
            return sm.latest_snapshot()
        if snapshot_id <= 0:
            raise SnapshotNotExistError(f"snapshot id {snapshot_id} of table {self.name} is not valid")
        return sm.snapshot(snapshot_id)

    def __repr__(self) -> str:
        return f"FileStoreTable({self.name!r}, {self.path!r})"
