"""Rescale: rewrite partitions into a new number of buckets as one OVERWRITE snapshot.

Each chosen partition is read merged (deletes applied) key range by key range and written through
a writer with a fixed bucket count, so memory stays bounded by `sort-spill-buffer-size` and the
write buffer. The commit overwrites exactly those partitions, so readers see the old layout or
the new, never a mix.
Later writes use each partition's own bucket count, read from the manifests. Rescaling every
partition of a fixed-bucket table also sets the table's `bucket` option (a new schema version),
as other engines' writers hash with it; after rescaling only some partitions, only this engine's
writers know the per-partition counts, so write to such a table with this engine.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from lakehouse_engine.compact.table_compact import compact_table
from lakehouse_engine.errors import InvalidOptionError, UnsupportedError
from lakehouse_engine.maintenance.expire import expire_after_commit
from lakehouse_engine.mergetree.changelog import changelog_producer
from lakehouse_engine.mergetree.range_merge import merge_budget
from lakehouse_engine.options import WRITE_ONLY
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.read.table_read import TableRead
from lakehouse_engine.schema import BucketMode
from lakehouse_engine.store.schema_manager import SchemaManager
from lakehouse_engine.write.deletion_vectors import deletion_vectors_enabled
from lakehouse_engine.write.freed_memory import FreedMemory
from lakehouse_engine.write.table_commit import TableCommit
from lakehouse_engine.write.table_write import TableWrite

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


def _partition_predicate(pb: PredicateBuilder, values: Mapping[str, Any]) -> Predicate | None:
    leaves = [pb.is_null(k) if v is None else pb.equal(k, v) for k, v in values.items()]
    return pb.and_predicates(leaves) if leaves else None


def rescale(table: FileStore, bucket_num: int,
            partitions: Sequence[Mapping[str, Any]] | None = None) -> list[int]:
    """Rewrite `partitions` (all when None) into `bucket_num` buckets; returns the snapshot id."""
    if not isinstance(bucket_num, int) or bucket_num <= 0:
        raise InvalidOptionError(f"rescale of table {table.name}: bucket_num must be a positive integer, got {bucket_num!r}")
    mode = table.bucket_mode()
    if not table.schema.has_primary_key or mode not in (BucketMode.HASH_FIXED, BucketMode.POSTPONE_MODE):
        raise UnsupportedError(
            f"rescale of table {table.name}: only fixed-bucket and postpone-bucket primary-key tables "
            f"can be rescaled ('bucket' is {table.options.bucket})")
    ids = _level0_up_first(table, partitions)
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return []
    codec = table.partition_codec()
    present = {e.partition for e in table.manifest_io().live_entries(snapshot) if e.bucket != POSTPONE_BUCKET}
    chosen = []
    for binary in sorted(present):
        part = codec.from_binary(binary)
        if part.matches(partitions):
            chosen.append((binary, part.as_dict()))
    if not chosen:
        return ids
    # The rows are rewritten, not new: written and committed as for a table without `write-only`,
    # whose committer takes the new buckets' level 0 up without changelog (an OVERWRITE's rows give
    # none). On a write-only table that level 0 would stay: invisible to DV reads, and a `lookup`
    # table's would give every row's `+I` again when a compaction took it up.
    write_only = table.options.require(WRITE_ONLY)
    target = table.copy({WRITE_ONLY.key: "false"}) if write_only else table
    writer = TableWrite.for_rescale(target, f"rescale-{uuid.uuid4()}", {b: bucket_num for b, _ in chosen},
                                    bucket_num)
    pb = PredicateBuilder(table.schema.field_names)
    # The merge reads its files in this thread, not ahead on others: the writer's flushes keep
    # the other cores busy, and batches decoded on other threads but freed here stay in those
    # threads' allocator heaps (a quarter more resident memory in the bounded-memory test).
    read = TableRead(table, for_rewrite=True, merge_threads=1)
    # The allocator's freed pages back to the OS as the rows go (see write/freed_memory.py).
    freed = FreedMemory(merge_budget(table.options))
    for _, values in chosen:
        scan = TableScan(table, _partition_predicate(pb, values), snapshot.id)
        for split in scan.plan().splits():
            # One merged key range at a time (`sort-spill-buffer-size`), into a writer bounded
            # by `write-buffer-size`: memory does not grow with the partition.
            for rows in read.read_split_ranges(split):
                writer.write_rows(rows, np.zeros(rows.num_rows, dtype=np.int8))
                freed.add(rows.nbytes)
                del rows
    messages = writer.prepare_commit()
    specs = [values for _, values in chosen] if table.schema.partition_keys else [{}]
    # One OVERWRITE of exactly these partitions (a write-only table's snapshots do not expire here).
    expire = None if write_only else partial(expire_after_commit, table)
    ids += TableCommit(target, writer.commit_user, specs, expire=expire).commit(messages)
    if partitions is None and mode is BucketMode.HASH_FIXED:
        # Every partition has the new count now: so must the table option, which other engines'
        # writers (pypaimon, Paimon on Spark/Flink) hash with (Paimon: ALTER TABLE SET bucket).
        SchemaManager(table.file_io, table.path_factory, table.name).commit_options({"bucket": str(bucket_num)})
    return ids


def _level0_up_first(table: FileStore, partitions: Sequence[Mapping[str, Any]] | None) -> list[int]:
    """A `lookup` table's level-0 rows (a write-only writer's) have not given their changelog yet,
    and a DV table's are invisible to the read the rescale rewrites from (its OVERWRITE would drop
    them). So their buckets are compacted first, in a COMPACT snapshot (with that changelog), as any
    compaction taking level 0 up, `write-only` table or not; returns its ids."""
    if changelog_producer(table.options) != "lookup" and not deletion_vectors_enabled(table.options):
        return []
    snapshot = table.latest_snapshot()
    if snapshot is None or not any(e.file.level == 0 and e.bucket != POSTPONE_BUCKET
                                   for e in table.manifest_io().live_entries(snapshot)):
        return []
    return compact_table(table, partitions=partitions, expire=partial(expire_after_commit, table),
                         move_postponed=False)
