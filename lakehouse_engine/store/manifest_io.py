"""Reading and writing manifests and manifest lists through FileIO, and resolving a snapshot's live files."""

from __future__ import annotations

import bisect
import dataclasses
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.binary_row import serialize_row
from lakehouse_engine.format.manifest import (
    decode_index_manifest_entries,
    decode_manifest_entries,
    decode_manifest_file_metas,
    encode_index_manifest_entries,
    encode_manifest_entries,
    encode_manifest_file_metas,
)
from lakehouse_engine.format.manifest_entries import (
    FileKind,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
    merge_entries,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.partition import PartitionCodec
from lakehouse_engine.path_factory import PathFactory

_CODECS = {"zstd": "zstandard", "deflate": "deflate", "null": "null", "none": "null", "snappy": "zstandard"}


class _ImmutableFileCache:
    """An LRU of decoded manifests: manifest files never change once written, so caching is safe."""

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._data: OrderedDict[str, list[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> list[Any] | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: list[Any]) -> None:
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)


    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_CACHE = _ImmutableFileCache()
# What Paimon's writers name metadata files: a prefix, a UUID and a counter. A control character,
# a path separator or a non-ASCII byte means the name itself was damaged where it was recorded.
_FILE_NAME_RE = re.compile(r"[A-Za-z0-9._-]+")


def check_file_name(name: str) -> bool:
    """Whether `name` can be a metadata file's name (letters, digits, '.', '_' and '-' only)."""
    return _FILE_NAME_RE.fullmatch(name) is not None


def clear_manifest_cache() -> None:
    """Forget decoded manifests (as a fresh process would); only tests and tools need this."""
    _CACHE.clear()


class ManifestIO:
    """Manifest and manifest-list files of one table."""

    def __init__(self, file_io: FileIO, paths: PathFactory, partition_codec: PartitionCodec,
                 schema_id: int, compression: str = "zstd"):
        self.file_io = file_io
        self.paths = paths
        self.partition_codec = partition_codec
        self.schema_id = schema_id
        self.codec = _CODECS.get(compression, "zstandard")
        # Which manifest list named each manifest read through `data_manifests`, for errors.
        self._listed_in: dict[str, str] = {}

    # ---- manifests --------------------------------------------------------------
    def _read_cached(self, name: str, what: str, decode: Callable[..., list[Any]],
                     expected_size: int | None = None, referrer: str | None = None) -> list[Any]:
        """Decode a metadata file once; with `expected_size` (recorded by whoever referenced it),
        a truncated file is detected even when the Avro that is left still decodes.

        `referrer` is the file that named this one. A flipped bit there reads as another name or
        size, so the error names both files; a name no writer produces blames the referrer only.
        """
        if not check_file_name(name):
            raise CorruptFileError(f"{referrer or 'a metadata file'} is damaged: it names {what} "
                                   f"{name!r}, which is not a valid file name")
        path = self.paths.manifest_path(name)
        cached = _CACHE.get(path)
        if cached is not None:
            return cached
        try:
            try:
                data = self.file_io.read_bytes(path)
            except FileNotFoundError:
                raise CorruptFileError(f"{what} {path} is missing") from None
            decoded = decode(data, path, expected_size=expected_size)
        except CorruptFileError as exc:
            if referrer is None:
                raise
            raise CorruptFileError(f"{exc} (named by {referrer}; one of the two is damaged, or "
                                   f"the file was deleted)") from exc
        _CACHE.put(path, decoded)
        return decoded

    def read_manifest(self, name: str, expected_size: int | None = None,
                      listed_in: str | None = None) -> list[ManifestEntry]:
        """A manifest's entries; `listed_in` (the manifest list naming it) is named in errors too."""
        return self._read_cached(name, "manifest file", decode_manifest_entries, expected_size,
                                 listed_in)

    def write_manifest(self, entries: Sequence[ManifestEntry]) -> ManifestFileMeta:
        """Write entries as one manifest file and return its ManifestFileMeta (with partition stats)."""
        name = self.paths.new_manifest_name()
        path = self.paths.manifest_path(name)
        data = encode_manifest_entries(entries, codec=self.codec)
        self.file_io.write_bytes(path, data)
        # Cached as a read would decode them: each file's entry now lives in this manifest.
        _CACHE.put(path, [e if e.file.listed_in == path else
                          dataclasses.replace(e, file=dataclasses.replace(e.file, listed_in=path))
                          for e in entries])
        added = sum(1 for e in entries if e.kind == FileKind.ADD)
        buckets = [e.bucket for e in entries]
        levels = [e.file.level for e in entries]
        totals = {e.total_buckets for e in entries}
        return ManifestFileMeta(
            file_name=name, file_size=len(data), num_added_files=added,
            num_deleted_files=len(entries) - added,
            partition_stats=self._partition_stats({e.partition for e in entries}),
            schema_id=self.schema_id,
            min_bucket=min(buckets) if buckets else None, max_bucket=max(buckets) if buckets else None,
            min_level=min(levels) if levels else None, max_level=max(levels) if levels else None,
            total_buckets=totals.pop() if len(totals) == 1 else None,
        )

    def _partition_stats(self, partitions: Iterable[bytes]) -> SimpleStats:
        codec = self.partition_codec
        if not codec.keys:
            return SimpleStats.EMPTY
        values = [codec.from_binary(p).values for p in partitions]
        mins: list[object] = []
        maxs: list[object] = []
        nulls: list[int | None] = []
        for i in range(len(codec.keys)):
            column = [v[i] for v in values if v[i] is not None]
            nulls.append(len(values) - len(column))
            try:
                mins.append(min(column) if column else None)  # type: ignore[type-var]
                maxs.append(max(column) if column else None)  # type: ignore[type-var]
            except TypeError:
                mins.append(None)
                maxs.append(None)
        return SimpleStats(serialize_row(mins, codec.types), serialize_row(maxs, codec.types), nulls)

    # ---- manifest lists ---------------------------------------------------------
    def read_manifest_list(self, name: str, expected_size: int | None = None,
                           listed_in: str | None = None) -> list[ManifestFileMeta]:
        """A manifest list's metas; `listed_in` (the snapshot naming it) is named in errors too."""
        return self._read_cached(name, "manifest list", decode_manifest_file_metas, expected_size,
                                 listed_in)

    def write_manifest_list(self, metas: Sequence[ManifestFileMeta]) -> tuple[str, int]:
        name = self.paths.new_manifest_list_name()
        path = self.paths.manifest_path(name)
        data = encode_manifest_file_metas(metas, codec=self.codec)
        self.file_io.write_bytes(path, data)
        _CACHE.put(path, list(metas))
        return name, len(data)

    # ---- index manifests ----------------------------------------------------------
    def read_index_manifest(self, name: str, listed_in: str | None = None) -> list[IndexManifestEntry]:
        """Every live index file of a snapshot (an index manifest lists them all, not a delta);
        `listed_in` (the snapshot or tag naming it) is named in errors too."""
        return self._read_cached(name, "index manifest", decode_index_manifest_entries,
                                 referrer=listed_in)

    def index_entries(self, snapshot: Snapshot | None) -> list[IndexManifestEntry]:
        """Every live index file of `snapshot` (none for a snapshot without an index manifest)."""
        if snapshot is None or not snapshot.index_manifest:
            return []
        return self.read_index_manifest(snapshot.index_manifest,
                                        snapshot.file or self.paths.snapshot_path(snapshot.id))

    def write_index_manifest(self, entries: Sequence[IndexManifestEntry]) -> str:
        name = self.paths.new_index_manifest_name()
        path = self.paths.manifest_path(name)
        self.file_io.write_bytes(path, encode_index_manifest_entries(entries, codec=self.codec))
        _CACHE.put(path, list(entries))
        return name

    # ---- snapshots --------------------------------------------------------------
    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """Base then delta manifests of a snapshot: together, every live data file."""
        # A tag's snapshot names its manifest lists in the tag file: that file is the referrer.
        snapshot_file = snapshot.file or self.paths.snapshot_path(snapshot.id)
        base = self.read_manifest_list(snapshot.base_manifest_list, snapshot.base_manifest_list_size,
                                       snapshot_file)
        delta = self.read_manifest_list(snapshot.delta_manifest_list,
                                        snapshot.delta_manifest_list_size, snapshot_file)
        self._listed_in.update((m.file_name, self.paths.manifest_path(snapshot.base_manifest_list))
                               for m in base)
        self._listed_in.update((m.file_name, self.paths.manifest_path(snapshot.delta_manifest_list))
                               for m in delta)
        return base + delta

    def read_entries(self, metas: Iterable[ManifestFileMeta]) -> list[ManifestEntry]:
        out: list[ManifestEntry] = []
        for m in metas:
            out.extend(self.read_manifest(m.file_name, m.file_size, self._listed_in.get(m.file_name)))
        return out

    def merged_entries(self, metas: Sequence[ManifestFileMeta]) -> list[ManifestEntry]:
        """The entries of the manifests `metas` folded in order (`merge_entries`): the ADDs that
        survive and the DELETEs left for older manifests; a file added twice names its manifests."""
        entries: list[ManifestEntry] = []
        ends: list[int] = []
        for m in metas:
            entries.extend(self.read_manifest(m.file_name, m.file_size, self._listed_in.get(m.file_name)))
            ends.append(len(entries))
        return merge_entries(entries, lambda i: metas[bisect.bisect_right(ends, i)].file_name)

    def added_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The ADD entries of `snapshot`'s delta: the files this one commit added."""
        delta = self.read_entries(self.read_manifest_list(snapshot.delta_manifest_list))
        return [e for e in delta if e.kind == FileKind.ADD]

    def live_entries(self, snapshot: Snapshot | None) -> list[ManifestEntry]:
        """The ADD entries of every data file live in `snapshot` (empty for None)."""
        if snapshot is None:
            return []
        return [e for e in self.merged_entries(self.data_manifests(snapshot)) if e.kind == FileKind.ADD]
