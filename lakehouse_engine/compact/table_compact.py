"""Dedicated compaction of a table: plan tasks per (partition, bucket), run them anywhere, commit once."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakehouse_engine.compact.task import CompactTask
from lakehouse_engine.errors import DataFileMissingError, InvalidArgumentError
from lakehouse_engine.format.features import check_entry, check_writable
from lakehouse_engine.mergetree.changelog import changelog_producer
from lakehouse_engine.mergetree.compact.levels import Levels
from lakehouse_engine.mergetree.compact.rewriter import BucketCompactor
from lakehouse_engine.mergetree.compact.universal import pick_unit
from lakehouse_engine.options import MERGE_ENGINE, CoreOptions
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.schema import BucketMode
from lakehouse_engine.threads import parallel_map
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.deletion_vectors import (
    DeletionVectorBase,
    DeletionVectorCompactor,
    deletion_vectors_enabled,
)
from lakehouse_engine.write.level0_changelog import level0_changelog_of
from lakehouse_engine.write.write_builder import BatchWriteBuilder

if TYPE_CHECKING:
    from lakehouse_engine.format.manifest_entries import ManifestEntry
    from lakehouse_engine.format.snapshot import Snapshot
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)


def plan_compaction(table: FileStore, full: bool = False,
                    partitions: Sequence[Mapping[str, Any]] | None = None,
                    level0_only: bool = False) -> list[CompactTask]:
    """One task per (partition, bucket) of the latest snapshot that has something to compact
    (`level0_only`: a level-0 file and a free level to take it up to, `universal.pick_level0_up`)."""
    codec = table.partition_codec()
    codec.check_spec_keys(partitions or [], table.name, "compact")
    if level0_only and (full or not table.schema.has_primary_key):
        raise InvalidArgumentError(f"table {table.name}: a level0_only compaction takes a primary-key "
                                   f"table's level 0 up; it is not a full compaction, nor one of an "
                                   f"append table (which has no levels)")
    if not table.schema.has_primary_key:
        from lakehouse_engine.compact.append import plan_append_compaction

        return plan_append_compaction(table, full, partitions)
    snapshot, live = table.read_latest(lambda s: (s, _checked_live_entries(table, s)))
    if snapshot is None:
        return []
    groups: dict[tuple[bytes, int], list[Any]] = defaultdict(list)
    for e in live:
        check_entry(table.name, e)
        if e.bucket == POSTPONE_BUCKET:
            continue
        if partitions and not codec.from_binary(e.partition).matches(partitions):
            continue
        groups[(e.partition, e.bucket)].append(e)
    tasks = []
    options = table.options
    dv_table = deletion_vectors_enabled(options)
    for (partition, bucket), entries in sorted(groups.items()):
        files = [e.file for e in entries]
        if dv_table:
            if not full and not any(f.level == 0 for f in files):
                continue  # a DV bucket compacts its level 0 (universal picks are for merged reads)
        elif pick_unit(Levels(files, options.num_levels), options, full, _level0_up(options), level0_only) is None:
            continue
        tasks.append(CompactTask(snapshot.id, partition, bucket, entries[0].total_buckets, files, full, level0_only))
    return tasks


def run_compact_task(table: FileStore, task: CompactTask) -> CommitMessage | None:
    """Compact one bucket as the task says; the files it writes are in the returned message."""
    if not table.schema.has_primary_key:
        from lakehouse_engine.compact.append import run_append_compact_task

        return run_append_compact_task(table, task)
    if deletion_vectors_enabled(table.options):
        return _run_deletion_vector_task(table, task)
    levels = Levels(task.files, table.options.num_levels)
    unit = pick_unit(levels, table.options, task.full, _level0_up(table.options), task.level0_only)
    if unit is None:
        return None
    part = table.partition_codec().from_binary(task.partition)
    # A `lookup` table's level-0 files give their changelog as they go up (write.level0_changelog).
    compactor = BucketCompactor(table, part, task.bucket, level0_changelog=level0_changelog_of(table))
    before, after = compactor.compact(levels, unit)
    if not before and not after:
        return None
    return CommitMessage(task.partition, task.bucket, task.total_buckets,
                         compact_before=before, compact_after=after,
                         compact_changelog=compactor.changelog_files,
                         compact_base=([f.file_name for f in task.files]
                                       if table.options.require(MERGE_ENGINE) == "first-row" else None))


def _level0_up(options: CoreOptions) -> bool:
    """The compaction of a table whose readers skip level 0 takes its level 0 up when nothing else
    is picked, as Paimon's (ForceUpLevel0Compaction, for tables that need lookups): Paimon reads
    first-row tables above level 0 only, and its first streaming plan of a `lookup`-producer table
    skips level 0 (a write-only writer's rows would otherwise stay out of it until a full compaction)."""
    return options.require(MERGE_ENGINE) == "first-row" or changelog_producer(options) == "lookup"


def _run_deletion_vector_task(table: FileStore, task: CompactTask) -> CommitMessage | None:
    """Compact one bucket of a DV table, its vectors applied and maintained."""
    snapshot = table.snapshot_manager().snapshot(task.snapshot_id)
    base = DeletionVectorBase.of_snapshot(table, snapshot).get((task.partition, task.bucket), DeletionVectorBase())
    part = table.partition_codec().from_binary(task.partition)
    done = DeletionVectorCompactor(table, part, task.bucket, base,
                                   level0_changelog=level0_changelog_of(table, lambda: snapshot)).compact(
        task.files, task.full)
    if done is None:
        return None
    return CommitMessage(task.partition, task.bucket, task.total_buckets, compact_before=done.before,
                         compact_after=done.after, compact_changelog=done.changelog_files,
                         deletion_vector_files=done.index_files,
                         deletion_vector_base=(list(base.index_files), list(base.upper_files)))


def run_unless_stale(table: FileStore, task: CompactTask) -> CommitMessage | None:
    """`run_compact_task`, or None when an input file went missing because another commit
    compacted it away and an expiry deleted it since the task was planned (the bucket's compaction
    is then simply skipped: its rows live on in the files that replaced it). A file missing from
    a bucket that still lists it is damage, and raises."""
    try:
        return run_compact_task(table, task)
    except DataFileMissingError:
        latest = table.snapshot_manager().latest_snapshot()
        if latest is None or latest.id == task.snapshot_id:
            raise
        live = {e.file.file_name for e in table.manifest_io().live_entries(latest)
                if e.partition == task.partition and e.bucket == task.bucket}
        if all(f.file_name in live for f in task.files):
            raise
        log.info("table %s, bucket %d: skipped a compaction whose input files another commit "
                 "replaced (and an expiry deleted) after it was planned", table.name, task.bucket)
        return None


def _checked_live_entries(table: FileStore, snapshot: Snapshot | None) -> list[ManifestEntry]:
    """The live entries of `snapshot`, once the table's features are known to be ones this
    engine compacts right."""
    if snapshot is None:
        return []
    mio = table.manifest_io()
    check_writable(table.name, table.options, snapshot, mio.index_entries(snapshot),
                   table.schema.has_primary_key)
    return mio.live_entries(snapshot)


def compact_table(table: FileStore, full: bool = False,
                  partitions: Sequence[Mapping[str, Any]] | None = None,
                  expire: Callable[[], None] | None = None, move_postponed: bool = True,
                  level0_only: bool = False) -> list[int]:
    """Compact (buckets on all cores) and commit COMPACT snapshots; returns their ids.

    A postpone-bucket table first moves its postponed rows into real buckets (unless not
    `move_postponed`, or `level0_only`). `expire` runs after each commit that landed (the facade
    passes the table's snapshot expiry). `level0_only`: each bucket's level 0 into one new sorted
    run at a free level, no other run merged (`universal.pick_level0_up`; a DV table's buckets
    compact their level 0 as usual); a `lookup` table's gives the changelog of that level 0.
    """
    ids: list[int] = []
    if move_postponed and not level0_only and table.bucket_mode() is BucketMode.POSTPONE_MODE:
        from lakehouse_engine.compact.postpone import compact_postpone

        ids += compact_postpone(table, partitions, expire)
    tasks = plan_compaction(table, full, partitions, level0_only)
    if not tasks:
        return ids
    results = parallel_map(lambda t: run_unless_stale(table, t), tasks)
    messages = [m for m in results if m is not None]
    if not messages:
        return ids
    commit = BatchWriteBuilder(table, expire=expire).new_commit()
    return ids + commit.commit(messages)

