"""What snapshots and tags reference: data files, manifests, manifest lists, index manifests, index files.

Expiry, rollback, tag deletion and orphan removal all ask the same question, "which files does this
set of snapshots still need?", and answer it here. Data and index files are absolute paths (as the
table's FileIO addresses them); manifests, manifest lists and index manifests are names in the
table's `manifest/` directory.

Snapshots of one table form a chain: the base manifest list of snapshot N+1 holds every live
manifest of N, and its delta list holds what N+1 changed. So the data files a run of consecutive
snapshots references are the live files of the first one plus whatever the later deltas add; a
file deleted by a delta is never added again (a compaction that only moves a file to another level
deletes and re-adds it in the same delta). This is what Paimon's own expiry relies on, and it keeps
the cost of a reference set near one manifest merge instead of one merge per snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CorruptFileError, SnapshotNotExistError
from lakehouse_engine.format.manifest_entries import (
    DataFileMeta,
    FileKind,
    IndexManifestEntry,
    ManifestEntry,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_COMPACT
from lakehouse_engine.options import CHANGELOG_PRODUCER
from lakehouse_engine.store.tag_files import list_tags

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


@dataclass
class References:
    """The files some snapshots need, by kind; `|` and `-` combine sets of references."""

    data_files: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    manifest_lists: set[str] = field(default_factory=set)
    index_manifests: set[str] = field(default_factory=set)
    index_files: set[str] = field(default_factory=set)

    def __or__(self, other: References) -> References:
        return References(self.data_files | other.data_files, self.manifests | other.manifests,
                          self.manifest_lists | other.manifest_lists,
                          self.index_manifests | other.index_manifests,
                          self.index_files | other.index_files)

    def update(self, other: References) -> None:
        """Add `other`'s references to these, in place."""
        self.data_files |= other.data_files
        self.manifests |= other.manifests
        self.manifest_lists |= other.manifest_lists
        self.index_manifests |= other.index_manifests
        self.index_files |= other.index_files

    def __sub__(self, other: References) -> References:
        return References(self.data_files - other.data_files, self.manifests - other.manifests,
                          self.manifest_lists - other.manifest_lists,
                          self.index_manifests - other.index_manifests,
                          self.index_files - other.index_files)

    def metadata_names(self) -> set[str]:
        """Every referenced name in the `manifest/` directory."""
        return self.manifests | self.manifest_lists | self.index_manifests

    def all_paths(self, table: FileStore) -> set[str]:
        """Every referenced file as an absolute path."""
        paths = table.path_factory
        return ({paths.manifest_path(n) for n in self.metadata_names()}
                | self.data_files | self.index_files)


# ---- paths ----------------------------------------------------------------------------------
def _local(path: str) -> str:
    """An external path (`file:/x`, `file:///x`) as the local filesystem addresses it."""
    if path.startswith("file:"):
        return "/" + path[len("file:"):].lstrip("/")
    return path


class DataPaths:
    """Absolute paths of data files; decodes each partition once per (partition, bucket)."""

    def __init__(self, table: FileStore):
        self.table = table
        self._dirs: dict[tuple[bytes, int], str] = {}

    def bucket_dir(self, partition: bytes, bucket: int) -> str:
        key = (partition, bucket)
        d = self._dirs.get(key)
        if d is None:
            spec = self.table.partition_codec().from_binary(partition).spec
            d = self._dirs[key] = self.table.path_factory.bucket_dir(spec, bucket)
        return d

    def of(self, partition: bytes, bucket: int, file: DataFileMeta) -> list[str]:
        """The data file and its extra files (file indexes live beside it)."""
        if file.external_path:
            main = _local(file.external_path)
            directory = os.path.dirname(main)
        else:
            directory = self.bucket_dir(partition, bucket)
            main = f"{directory}/{file.file_name}"
        return [main] + [f"{directory}/{extra}" for extra in file.extra_files]

    def of_entry(self, entry: ManifestEntry) -> list[str]:
        return self.of(entry.partition, entry.bucket, entry.file)


def index_file_path(table: FileStore, entry: IndexManifestEntry) -> str:
    if entry.external_path:
        return _local(entry.external_path)
    return f"{table.path_factory.index_dir}/{entry.file_name}"


def _manifest_lists(snapshot: Snapshot) -> list[tuple[str, int | None]]:
    """(name, recorded size) of the manifest lists a snapshot names: base, delta and changelog
    (when present); the size lets a truncated list be detected."""
    lists = [(snapshot.base_manifest_list, snapshot.base_manifest_list_size),
             (snapshot.delta_manifest_list, snapshot.delta_manifest_list_size)]
    if snapshot.changelog_manifest_list:
        lists.append((snapshot.changelog_manifest_list, snapshot.changelog_manifest_list_size))
    return lists


# ---- reading ----------------------------------------------------------------------------------
def index_files(table: FileStore, index_manifest: str) -> set[str]:
    """Paths of the index files an index manifest keeps live (ADDs not deleted after)."""
    live: dict[str, str] = {}
    for e in table.manifest_io().read_index_manifest(index_manifest):
        if e.kind == FileKind.ADD:
            live[e.file_name] = index_file_path(table, e)
        else:
            live.pop(e.file_name, None)
    return set(live.values())


def _entries(table: FileStore, list_name: str, size: int | None) -> list[ManifestEntry]:
    mio = table.manifest_io()
    return mio.read_entries(mio.read_manifest_list(list_name, size))


def live_data_files(table: FileStore, snapshot: Snapshot, paths: DataPaths | None = None) -> set[str]:
    """Paths of every data file live in `snapshot` (a merge of its base and delta manifests)."""
    paths = paths or DataPaths(table)
    mio = table.manifest_io()
    merged = mio.merged_entries(mio.data_manifests(snapshot))
    return {p for e in merged if e.kind == FileKind.ADD for p in paths.of_entry(e)}


def delta_changes(table: FileStore, snapshot: Snapshot, paths: DataPaths | None = None,
                  keep_appends: bool = False) -> tuple[set[str], set[str]]:
    """(added, deleted) data file paths of the snapshot's delta; a path in both only changed level.

    With `keep_appends` a deleted file a writer added (file source APPEND, or none recorded) is
    left out of `deleted`: a long-lived changelog of a table without a producer still reads it.
    """
    paths = paths or DataPaths(table)
    added: set[str] = set()
    deleted: set[str] = set()
    for e in _entries(table, snapshot.delta_manifest_list, snapshot.delta_manifest_list_size):
        if e.kind == FileKind.ADD:
            added.update(paths.of_entry(e))
        elif not keep_appends or e.file.file_source == FILE_SOURCE_COMPACT:
            deleted.update(paths.of_entry(e))
    return added, deleted


def changelog_files(table: FileStore, snapshot: Snapshot, paths: DataPaths | None = None) -> set[str]:
    """Paths of the changelog files a snapshot produced (none unless a changelog producer ran)."""
    if not snapshot.changelog_manifest_list:
        return set()
    paths = paths or DataPaths(table)
    return {p for e in _entries(table, snapshot.changelog_manifest_list,
                                snapshot.changelog_manifest_list_size)
            if e.kind == FileKind.ADD for p in paths.of_entry(e)}


def produces_changelog(table: FileStore) -> bool:
    """Whether the table has a changelog producer (its changes are changelog files, not deltas)."""
    return table.options.require(CHANGELOG_PRODUCER) != "none"


def changelog_metadata(table: FileStore, snapshot: Snapshot, data_lists: bool,
                       existing_only: bool = False) -> References:
    """The manifest lists and manifests a long-lived changelog of `snapshot` reads: its changelog
    manifest list, and with `data_lists` (a table without a producer) its base and delta lists
    too. `existing_only` skips lists already deleted (a changelog's data lists go with its
    snapshot when the table has a producer)."""
    lists = []
    if snapshot.changelog_manifest_list:
        lists.append((snapshot.changelog_manifest_list, snapshot.changelog_manifest_list_size))
    if data_lists:
        lists += [(snapshot.base_manifest_list, snapshot.base_manifest_list_size),
                  (snapshot.delta_manifest_list, snapshot.delta_manifest_list_size)]
    mio = table.manifest_io()
    refs = References()
    for name, size in lists:
        if existing_only and not table.file_io.exists(table.path_factory.manifest_path(name)):
            continue
        refs.manifest_lists.add(name)
        refs.manifests.update(m.file_name for m in mio.read_manifest_list(name, size))
    return refs


def long_lived_changelog_references(table: FileStore, changelogs: Iterable[Snapshot],
                                    paths: DataPaths | None = None) -> References:
    """Everything long-lived changelogs read: their lists and manifests that still exist, their
    changelog files, and the files their deltas added (a table without a producer)."""
    paths = paths or DataPaths(table)
    refs = References()
    for c in changelogs:
        refs.update(changelog_metadata(table, c, True, existing_only=True))
        refs.data_files |= changelog_files(table, c, paths)
        if table.file_io.exists(table.path_factory.manifest_path(c.delta_manifest_list)):
            refs.data_files |= delta_changes(table, c, paths)[0]
    return refs


def long_lived_changelogs(table: FileStore) -> list[Snapshot]:
    """Every long-lived changelog of the table's branch (`changelog/changelog-<id>`), oldest first."""
    sm = table.snapshot_manager()
    out = []
    for cid in sm.list_long_lived_changelog_ids():
        try:
            out.append(sm.long_lived_changelog(cid))
        except SnapshotNotExistError:
            continue  # expired since the listing
    return out


def metadata_references(table: FileStore, snapshots: Iterable[Snapshot]) -> References:
    """Manifest lists, manifests, index manifests and index files of `snapshots` (no data files)."""
    mio = table.manifest_io()
    refs = References()
    for s in snapshots:
        for list_name, size in _manifest_lists(s):
            if list_name in refs.manifest_lists:
                continue
            refs.manifest_lists.add(list_name)
            refs.manifests.update(m.file_name for m in mio.read_manifest_list(list_name, size))
        if s.index_manifest and s.index_manifest not in refs.index_manifests:
            refs.index_manifests.add(s.index_manifest)
            refs.index_files |= index_files(table, s.index_manifest)
    return refs


def consecutive_runs(snapshots: Iterable[Snapshot]) -> list[list[Snapshot]]:
    """Snapshots sorted by id and cut where an id is missing: each run is one piece of the chain."""
    runs: list[list[Snapshot]] = []
    for s in sorted({s.id: s for s in snapshots}.values(), key=lambda s: s.id):
        if runs and runs[-1][-1].id + 1 == s.id:
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


def snapshot_references(table: FileStore, snapshots: Sequence[Snapshot],
                        paths: DataPaths | None = None) -> References:
    """Everything `snapshots` reference; data files are the union of their live files.

    Each run of consecutive ids costs one full merge (its first snapshot) plus its deltas.
    """
    paths = paths or DataPaths(table)
    refs = metadata_references(table, snapshots)
    for run in consecutive_runs(snapshots):
        refs.data_files |= live_data_files(table, run[0], paths)
        for s in run[1:]:
            refs.data_files |= delta_changes(table, s, paths)[0]
        for s in run:
            refs.data_files |= changelog_files(table, s, paths)
    return refs


def tag_references(table: FileStore, tags: Iterable[Snapshot],
                   paths: DataPaths | None = None) -> References:
    """Everything tagged snapshots reference; each tag is merged on its own (tags need not be a chain)."""
    paths = paths or DataPaths(table)
    refs = References()
    seen: set[tuple[str, str]] = set()
    for tag in tags:
        key = (tag.base_manifest_list, tag.delta_manifest_list)
        if key in seen:
            continue
        seen.add(key)
        refs.update(metadata_references(table, [tag]))
        refs.data_files |= live_data_files(table, tag, paths) | changelog_files(table, tag, paths)
    return refs


def delete_files(table: FileStore, refs: References) -> None:
    """Delete unreferenced files: data and index files, then manifests, then the lists naming them.

    Branches share the table's data and manifest files: a file another branch (its snapshots or
    tags) references is kept. Deletes are quiet (a file already gone is what we want); an
    interrupted run leaves orphans.
    """
    fio = table.file_io
    kept = other_branches_paths(table)
    for path in sorted(refs.data_files) + sorted(refs.index_files):
        if path not in kept:
            fio.delete_file(path)
    for names in (refs.manifests, refs.index_manifests, refs.manifest_lists):
        for name in sorted(names):
            path = table.path_factory.manifest_path(name)
            if path not in kept:
                fio.delete_file(path)


# ---- every branch ---------------------------------------------------------------------------------
_ATTEMPTS = 3


def used_paths(table: FileStore) -> set[str]:
    """Paths of every file a snapshot, tag or long-lived changelog of `table`'s branch references.

    A snapshot expired while this reads it is skipped, and the whole read is retried: a file
    went missing for a good reason. Any other unreadable file raises.
    """
    attempt = 0
    while True:
        attempt += 1
        snapshots = table.snapshot_manager()
        retained = []
        for sid in snapshots.list_snapshot_ids():
            try:
                retained.append(snapshots.snapshot(sid))
            except SnapshotNotExistError:
                continue
        tags = list_tags(table)
        changelogs = long_lived_changelogs(table)
        try:
            paths = DataPaths(table)
            refs = snapshot_references(table, retained, paths) | tag_references(table, tags.values(), paths)
            refs.update(long_lived_changelog_references(table, changelogs, paths))
            return refs.all_paths(table)
        except CorruptFileError:
            gone = [s.id for s in retained if not snapshots.snapshot_exists(s.id)]
            gone += [c.id for c in changelogs if not snapshots.long_lived_changelog_exists(c.id)]
            if not gone or attempt == _ATTEMPTS:
                raise


def branch_stores(table: FileStore) -> list[FileStore]:
    """The store of every branch of the table (main first), `table` itself for its own branch."""
    names = ["main", *table.branches()]
    return [table if n == table.branch else table.for_branch(n) for n in names]


def other_branches_paths(table: FileStore) -> set[str]:
    """Paths of the files the table's other branches reference (none when it has no branch)."""
    out: set[str] = set()
    for store in branch_stores(table):
        if store.branch != table.branch:
            out |= used_paths(store)
    return out
