"""What manifests list, as dataclasses: data files (DataFileMeta) added or deleted by manifest
entries (ManifestEntry), manifest files (ManifestFileMeta) and index files (IndexManifestEntry),
and how an ordered ADD/DELETE log folds into the live files. Their Avro form is `manifest`'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar, TypeAlias

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.binary_row import BinaryRowBytes


class FileKind(IntEnum):
    """Whether a manifest entry adds a file to the table or deletes it."""

    ADD = 0
    DELETE = 1



#: Paimon's FileEntry.Identifier: (partition, bucket, level, file_name, extra_files,
#: embedded_index, external_path). Two entries with equal identifiers refer to the same file.
FileIdentifier: TypeAlias = tuple[bytes, int, int, str, tuple[str, ...], bytes | None, str | None]


@dataclass(frozen=True, slots=True)
class SimpleStats:
    """Min/max values (serialized BinaryRows) and per-field null counts of some columns."""

    min_values: bytes
    max_values: bytes
    null_counts: list[int | None] | None

    EMPTY: ClassVar[SimpleStats]

    def __post_init__(self) -> None:
        # Still bytes; also `.data`, as pypaimon's rows (`key_stats.min_values.data`).
        if type(self.min_values) is not BinaryRowBytes:
            object.__setattr__(self, "min_values", BinaryRowBytes(self.min_values))
        if type(self.max_values) is not BinaryRowBytes:
            object.__setattr__(self, "max_values", BinaryRowBytes(self.max_values))


# Arity 0 plus an 8-byte zero header: the BinaryRow of no fields.
SimpleStats.EMPTY = SimpleStats(b"\x00" * 12, b"\x00" * 12, [])


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    """Metadata of one data file as a manifest records it (Paimon's DataFileMeta).

    `creation_time_millis` is the raw `_CREATION_TIME` value; Paimon writes the local wall-clock
    time there as if it were UTC, so it equals epoch millis only on a UTC host.
    """

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...] = ()
    creation_time_millis: int | None = None
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: int | None = None
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None
    write_cols_sequences: tuple[int, ...] | None = None
    #: The manifest this entry was decoded from (not part of the record): errors about the file
    #: name it too, since a damaged entry reads as a missing or mismatching file.
    listed_in: str | None = field(default=None, compare=False, repr=False)
    #: Where the file is (not part of the record): set on the files of a scan's splits and of a
    #: writer's commit messages, as pypaimon's `DataFileMeta.file_path`.
    file_path: str | None = field(default=None, compare=False, repr=False)

    def located(self, bucket_dir: str) -> DataFileMeta:
        """This file with its `file_path` (its external path, else `bucket_dir/file_name`) set;
        the file's record is unchanged, so the same object is kept and only the path is filled."""
        if self.file_path is None:
            object.__setattr__(self, "file_path", self.external_path or f"{bucket_dir}/{self.file_name}")
        return self

    def upgrade(self, new_level: int) -> DataFileMeta:
        """Return the same file placed at `new_level`, which must be above its current level."""
        if new_level <= self.level:
            raise ValueError(
                f"cannot upgrade {self.file_name} from level {self.level} to {new_level}"
            )
        return dataclasses.replace(self, level=new_level)


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One ADD or DELETE of a data file in a (partition, bucket), as a manifest file records it."""

    kind: FileKind
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> FileIdentifier:
        """The key under which ADD and DELETE entries of the same file meet (FileEntry.Identifier)."""
        f = self.file
        return (
            self.partition,
            self.bucket,
            f.level,
            f.file_name,
            f.extra_files,
            f.embedded_index,
            f.external_path,
        )


@dataclass(frozen=True, slots=True)
class ManifestFileMeta:
    """One manifest file as a manifest list records it: name, size, counts and bucket/level ranges."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None
    max_bucket: int | None
    min_level: int | None
    max_level: int | None
    total_buckets: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None
    extra_files: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DeletionVectorMeta:
    """Where one data file's deletion vector sits inside a deletion-vectors index file."""

    data_file_name: str
    offset: int
    length: int
    cardinality: int | None = None


@dataclass(frozen=True, slots=True)
class GlobalIndexMeta:
    """Row range and field of a global index file (passed through unchanged)."""

    row_range_start: int
    row_range_end: int
    index_field_id: int
    extra_field_ids: tuple[int, ...] | None = None
    index_meta: bytes | None = None
    source_meta: bytes | None = None


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    """One index file (HASH bucket index, DELETION_VECTORS, ...) of a (partition, bucket)."""

    kind: FileKind
    partition: bytes
    bucket: int
    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: tuple[DeletionVectorMeta, ...] | None = None
    external_path: str | None = None
    global_index: GlobalIndexMeta | None = None


def merge_entries(entries: Sequence[ManifestEntry],
                  origin: Callable[[int], str] | None = None) -> list[ManifestEntry]:
    """Fold an ordered ADD/DELETE log as Paimon's FileEntry.mergeEntries does, keeping first-seen order.

    An ADD followed by a DELETE of the same file cancels out; a DELETE with no earlier ADD is kept
    so that merging with older manifests can cancel it. A second ADD of a file raises, naming the
    manifests that hold the two (`origin`: the manifest file of the entry at an index).
    """
    merged: dict[FileIdentifier, ManifestEntry] = {}
    for i, entry in enumerate(entries):
        key = entry.identifier
        if entry.kind == FileKind.ADD:
            if key in merged:
                where = ""
                if origin is not None:
                    # (The error path only: find the earlier ADD again rather than track every entry.)
                    first = next(j for j in range(i) if entries[j].kind == FileKind.ADD
                                 and entries[j].identifier == key)
                    names = list(dict.fromkeys((origin(first), origin(i))))
                    where = (f" (in manifest{'s' if len(names) > 1 else ''} "
                             f"{' and '.join(map(repr, names))}: one is damaged)")
                raise CorruptFileError(
                    f"data file {entry.file.file_name!r} (bucket {entry.bucket}, level "
                    f"{entry.file.level}) is added twice without a delete in between{where}"
                )
            merged[key] = entry
        elif entry.kind != FileKind.DELETE:
            raise ValueError(f"unknown file kind {entry.kind!r} for {entry.file.file_name!r}")
        elif key in merged:
            del merged[key]
        else:
            merged[key] = entry
    return list(merged.values())


def live_files(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """The ADD entries that survive merging: the files a snapshot's manifests make visible."""
    return [e for e in merge_entries(list(entries)) if e.kind == FileKind.ADD]
