"""The `lookup` changelog of a compaction that takes level-0 files up (Paimon's
LookupMergeTreeCompactRewriter with its LookupChangelogMergeFunctionWrapper).

Paimon's invariant, which every writer and compaction here keeps: a level-0 file a snapshot lists
has not given its changelog yet; the compaction that takes it up gives it, in its COMPACT snapshot.
So a `write-only` writer (and every writer that leaves its rows in level 0) writes no lookup
changelog, and the compaction that later takes those files up compares their records with the
bucket's files above level 0: per key `+I`, `-U` old / `+U` new, `-D` old, or nothing.

As Paimon's merge does, every level-0 record of a key is merged with the key's row above level 0
and gives ONE change (a key written in two write-only commits gives `+I` of its last row, not an
insert and then an update). The level-0 files are read key range by key range (`range_merge`, in
`sort-spill-buffer-size`), each range's keys looked up above level 0 and its changes appended to
the changelog files: memory is one range's records and the older rows matched.

A normal writer's own runs, already looked up at their flush, are not compared again (`given`);
the level-0 files between two of them are compared with the files above level 0 and every older
level-0 file (given ones included), one change per key for each such stretch of files.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.changelog import changelog_producer
from lakehouse_engine.mergetree.compact.levels import Levels
from lakehouse_engine.mergetree.compact.rewriter import BucketCompactor
from lakehouse_engine.mergetree.compact.universal import pick_unit
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_APPEND, DataFileWriter
from lakehouse_engine.mergetree.data_file_check import checked_batches
from lakehouse_engine.mergetree.merge_order import merge_order
from lakehouse_engine.mergetree.range_merge import merge_budget, range_merge
from lakehouse_engine.mergetree.rolling_writer import RollingRunWriter
from lakehouse_engine.write.changelog_producers import LookupChangelog
from lakehouse_engine.write.commit_message import CommitMessage

if TYPE_CHECKING:
    from lakehouse_engine.format.snapshot import Snapshot
    from lakehouse_engine.partition import Partition
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.write.first_row_check import BucketLevel0Up

__all__ = ["Level0Changelog", "level0_changelog_of", "lookup_level0_up"]


class Level0Changelog:
    """Writes the `lookup` changelog of the level-0 files a compaction takes up (see the module)."""

    def __init__(self, table: FileStore, snapshot: Callable[[], Snapshot | None] | None = None,
                 given: Collection[str] = ()):
        """`snapshot`: the snapshot the bucket's files come from (its deletion vectors mark rows
        that are no longer live); `given`: level-0 files whose changelog their flush gave."""
        self.table = table
        self.given = set(given)
        self._snapshot = snapshot
        self._lookup: LookupChangelog | None = None  # built when a file needs it (rarely: see `given`)

    def changelog(self, partition: Partition, bucket: int, level0: list[DataFileMeta],
                  upper: list[DataFileMeta]) -> list[DataFileMeta]:
        """The changelog files of `level0`'s records (but those in `given`) against `upper`, the
        bucket's files above level 0 (and the older level-0 files); in the order to read them."""
        ordered = merge_order(level0)
        # Stretches of consecutive files to compare (no `given` file between two of them), each
        # with the files older than it.
        stretches: list[tuple[list[DataFileMeta], list[DataFileMeta]]] = []
        for i, f in enumerate(ordered):
            if f.file_name in self.given:
                continue
            if i and stretches and stretches[-1][0][-1] is ordered[i - 1]:
                stretches[-1][0].append(f)
            else:
                stretches.append(([f], list(upper) + ordered[:i]))
        if not stretches:
            return []
        if self._lookup is None:
            self._lookup = LookupChangelog(self.table, self._snapshot)
        written: list[DataFileMeta] = []
        bucket_dir = self.table.path_factory.bucket_dir(partition.spec, bucket)
        try:
            for files, older in stretches:
                written += self._stretch_changelog(partition, bucket, bucket_dir, files, older)
        except Exception:
            for f in written:  # nothing of a failed compaction stays behind
                self.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
            raise
        return written

    def _stretch_changelog(self, partition: Partition, bucket: int, bucket_dir: str,
                           files: list[DataFileMeta], older: list[DataFileMeta]) -> list[DataFileMeta]:
        """One sorted run of changelog files: the changes of `files`' keys, range by range."""
        lookup = self._lookup
        assert lookup is not None
        schema = self.table.schema
        key_names = schema.trimmed_primary_keys
        key_types = schema.types_of(key_names)
        columns = lookup.columns
        reader = self.table.file_reader(for_rewrite=True)

        def batches(f: DataFileMeta, batch_bytes: int) -> Iterator[pa.Table]:
            path = f"{bucket_dir}/{f.file_name}"
            return checked_batches(reader.read_batches(path, columns, lookup.read_schema, f, batch_bytes),
                                   path, key_names, key_types, f)

        def key_of(binary: bytes) -> tuple[Any, ...]:
            return comparable_key(deserialize_row(binary, key_types))

        def changes(records: pa.Table, in_order: bool) -> pa.Table:
            # Every record of the range's keys is here (range_merge): one change per key.
            return lookup.record_changes(partition, bucket, records, older, in_order)

        ranges = range_merge(files, batches, key_names, changes, merge_budget(self.table.options), key_of)
        writer = RollingRunWriter(DataFileWriter(self.table.file_io, schema, bucket_dir,
                                                 self.table.path_factory.new_changelog_file_name,
                                                 lookup.target_file_size), 0, FILE_SOURCE_APPEND)
        return writer.write_all(ranges)


def level0_changelog_of(table: FileStore, snapshot: Callable[[], Snapshot | None] | None = None,
                        given: Collection[str] = ()) -> Level0Changelog | None:
    """The Level0Changelog of a compaction of `table` (None unless it is a primary-key table with
    `changelog-producer` = lookup)."""
    if not table.schema.has_primary_key or changelog_producer(table.options) != "lookup":
        return None
    return Level0Changelog(table, snapshot, given)


def lookup_level0_up(table: FileStore, commit_user: str, changelog: bool = True,
                     checked: bool = False) -> BucketLevel0Up:
    """The committer's compaction of a `lookup` table's bucket whose level 0 its writer did not take
    up (a write-only writer's, a Spark data source task's, a compaction that lost a race): level 0
    up (Paimon's ForceUpLevel0Compaction) with the changelog of every level-0 file it takes
    (without `changelog`: an overwrite's files, which give none); `checked`: its message names the
    files it started from, for the commit to check like a writer's (a first-row table's)."""

    def compact(key: tuple[bytes, int], total: int, files: list[DataFileMeta]) -> CommitMessage | None:
        levels = Levels(files, table.options.num_levels)
        unit = pick_unit(levels, table.options, False, force_up_level0=True)
        if unit is None:
            return None
        compactor = BucketCompactor(table, table.partition_codec().from_binary(key[0]), key[1],
                                    level0_changelog=level0_changelog_of(table) if changelog else None)
        before, after = compactor.compact(levels, unit)
        if not before and not after:
            return None
        return CommitMessage(key[0], key[1], total, compact_before=before, compact_after=after,
                             compact_changelog=compactor.changelog_files,
                             compact_base=[f.file_name for f in files] if checked else None,
                             commit_user=commit_user)

    return compact
