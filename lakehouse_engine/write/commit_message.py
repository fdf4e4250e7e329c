"""CommitMessage: what one writer (in any process) hands to the committer for one bucket."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


@dataclass
class CommitMessage:
    """New and compacted files of one (partition, bucket); picklable, so it can cross processes.

    Dynamic-bucket writers add the bucket's new HASH index file (`new_index_files`), the one it
    replaces (`deleted_index_files`), the names of the partition's index files the writer started
    from (`index_base`, to detect a concurrent assigner) and how many distinct keys it inserted
    or updated in the bucket.
    """

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: list[DataFileMeta] = field(default_factory=list)
    compact_before: list[DataFileMeta] = field(default_factory=list)
    compact_after: list[DataFileMeta] = field(default_factory=list)
    new_index_files: list[IndexManifestEntry] = field(default_factory=list)
    deleted_index_files: list[IndexManifestEntry] = field(default_factory=list)
    index_base: list[str] | None = None
    inserted_keys: int | None = None
    updated_keys: int | None = None
    #: Changelog files of the new data (the `input` producer): the APPEND snapshot's changelog.
    new_changelog: list[DataFileMeta] = field(default_factory=list)
    #: Changelog files of the compaction (`lookup`, `full-compaction`): the COMPACT snapshot's.
    compact_changelog: list[DataFileMeta] = field(default_factory=list)
    #: A DV table's compaction: the bucket's new deletion-vector index files (replacing all of its
    #: old ones; empty: its vectors are unchanged), and what the bucket held when they were computed
    #: (its vector index files and its files above level 0; None: no DV compaction).
    deletion_vector_files: list[IndexManifestEntry] = field(default_factory=list)
    deletion_vector_base: tuple[list[str], list[str]] | None = None
    #: The `lookup` changelog producer: the bucket's files the lookup compared the new rows with
    #: (None: no lookup), and the snapshot they were read from (0: none). Files the bucket gained
    #: since (live still or compacted away again) that share keys make it stale.
    lookup_base: list[str] | None = None
    lookup_snapshot: int | None = None
    #: Cross-partition upsert: the snapshot the writer's global index was read from (None: other
    #: bucket modes). Another writer's files since then that hold keys of this bucket's new files
    #: in another partition or bucket make the routing stale.
    route_snapshot: int | None = None
    #: A first-row table's compaction: the bucket's files its lookup saw (None: none). A file above
    #: level 0 the bucket gained since, sharing a key with its output, would hold that key twice.
    compact_base: list[str] | None = None
    #: The commit user of the write that made the files: a committer under another user may be a
    #: retry of a commit that landed, and checks the snapshots for these files (None: unknown).
    commit_user: str | None = None

    def is_empty(self) -> bool:
        return not (self.new_files or self.compact_before or self.compact_after or self.new_index_files
                    or self.new_changelog or self.compact_changelog or self.deletion_vector_files)


def delete_message_files(table: FileStore, messages: Sequence[CommitMessage],
                         compaction_only: bool = False) -> None:
    """Delete the files `messages` wrote, which will not be committed.

    A file a compaction only moved up a level is the same physical file as its committed
    original and is never deleted. With `compaction_only`, the new data files and index files
    (committed by the APPEND before the compaction) are kept too.
    """
    codec = table.partition_codec()
    for m in messages:
        d = table.path_factory.bucket_dir(codec.from_binary(m.partition).spec, m.bucket)
        for e in m.deletion_vector_files:  # a compaction's output, never committed here
            table.file_io.delete_file(f"{table.path_factory.index_dir}/{e.file_name}")
        upgraded = {f.file_name for f in m.compact_before}
        written = [f for f in m.compact_after if f.file_name not in upgraded]
        written += m.compact_changelog
        if not compaction_only:
            written += m.new_files + m.new_changelog
            for e in m.new_index_files:
                table.file_io.delete_file(f"{table.path_factory.index_dir}/{e.file_name}")
        for f in written:
            table.file_io.delete_file(f"{d}/{f.file_name}")
