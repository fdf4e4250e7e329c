"""TableScan: from a snapshot's manifests to the live files that may match, packed into splits."""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakehouse_engine.errors import CorruptFileError, InvalidArgumentError, LakehouseError
from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.deletion_vectors import DeletionFile
from lakehouse_engine.format.features import check_entry as check_features
from lakehouse_engine.format.features import check_readable
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import (
    DataFileMeta,
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.data_file_check import check_entry
from lakehouse_engine.mergetree.interval_partition import interval_partition
from lakehouse_engine.options import (
    MERGE_ENGINE,
    SCAN_FALLBACK_BRANCH,
    SOURCE_SPLIT_OPEN_FILE_COST,
    SOURCE_SPLIT_TARGET_SIZE,
)
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.read.bucket_select import select_buckets, specialise
from lakehouse_engine.read.deletion_vectors import (
    deletion_vectors_enabled,
    snapshot_deletion_files,
)
from lakehouse_engine.read.predicate import Predicate
from lakehouse_engine.read.split import DataSplit, PartitionRow, ordered_pack
from lakehouse_engine.schema import BucketMode, TableSchema

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore



class Plan:
    """The result of a scan: its splits (pypaimon's `Plan`)."""

    def __init__(self, splits: list[DataSplit], snapshot: Snapshot | None):
        self._splits = splits
        self.snapshot = snapshot

    def splits(self) -> list[DataSplit]:
        return self._splits

    @property
    def snapshot_id(self) -> int | None:
        """The id of the snapshot the plan reads (None for a table without snapshots), as pypaimon."""
        return self.snapshot.id if self.snapshot is not None else None


class TableScan:
    """Plans the splits of one snapshot (latest unless the table's scan options or a call pick one)."""

    def __init__(self, table: FileStore, predicate: Predicate | None = None,
                 snapshot_id: int | None = None, tag: str | None = None):
        self.table = table
        self.predicate = predicate
        self.snapshot_id = snapshot_id
        self.tag = tag
        schema = table.schema
        self.partition_keys = list(schema.partition_keys)
        self.partition_fields = [schema.field(k) for k in self.partition_keys]
        self.key_names = schema.trimmed_primary_keys if schema.has_primary_key else []
        self.key_types = schema.types_of(self.key_names)
        self.primary_key = schema.has_primary_key
        opts = schema.core_options
        self.target_split_size = opts.require(SOURCE_SPLIT_TARGET_SIZE)
        self.open_file_cost = opts.require(SOURCE_SPLIT_OPEN_FILE_COST)
        # Aggregation builds a new record even from a single one (`collect` with `distinct`
        # de-duplicates a lone array, ...): never read its files as they are.
        self.merge_free_single_rows = opts.get(MERGE_ENGINE) != "aggregation"
        # Deletion vectors: level 0 is not yet looked up, so invisible; every other file reads on
        # its own, its replaced rows dropped by its vector (Paimon's raw-convertible splits).
        self.deletion_vectors = self.primary_key and deletion_vectors_enabled(opts)
        self._as_is: dict[int, bool] = {schema.id: True}
        # Bucket pruning needs the bucket a key hashes to: fixed-bucket tables only.
        self.bucket_keys = schema.bucket_keys if schema.bucket_mode is BucketMode.HASH_FIXED else []
        self._buckets: dict[tuple[Any, ...], set[int] | None] = {}
        #: Which live files the plan reads besides pruning (a streaming read's first plan leaves
        #: out what its changelog will deliver; a bucket filter); None reads them all.
        self.entry_filter: Callable[[ManifestEntry], bool] | None = None

    def with_shard(self, index_of_this_subtask: int, number_of_subtasks: int) -> TableScan:
        """Plan only shard `index_of_this_subtask` of `number_of_subtasks` (pypaimon's and Paimon's
        `withShard`): a primary-key table's buckets with `bucket % n == index`, an append table's
        files by a hash of their name, so the shards' plans are disjoint and together the whole."""
        if not (isinstance(index_of_this_subtask, int) and isinstance(number_of_subtasks, int)
                and 0 <= index_of_this_subtask < number_of_subtasks):
            raise InvalidArgumentError(
                f"with_shard({index_of_this_subtask}, {number_of_subtasks}): the index must be at "
                f"least 0 and below the number of subtasks, which must be positive")
        n, i = number_of_subtasks, index_of_this_subtask
        if self.primary_key:
            def in_shard(e: ManifestEntry) -> bool:
                return e.bucket % n == i
        else:
            def in_shard(e: ManifestEntry) -> bool:
                # crc32, not hash(): every process must put a file in the same shard.
                return zlib.crc32(e.file.file_name.encode()) % n == i
        before = self.entry_filter
        self.entry_filter = in_shard if before is None else (lambda e: before(e) and in_shard(e))
        return self

    def plan(self) -> Plan:
        """The splits of the snapshot this scan reads; with `scan.fallback-branch`, partitions
        the table's branch does not have come from the fallback branch (as Paimon's batch read)."""
        plan = self._plan()
        fallback = self.table.options.get(SCAN_FALLBACK_BRANCH)
        if (fallback and fallback != self.table.branch and self.partition_keys
                and self.snapshot_id is None and self.tag is None):
            plan = self._with_fallback(plan, fallback)
        return plan

    def _with_fallback(self, plan: Plan, branch: str) -> Plan:
        own = ({e.partition for e in self.table.manifest_io().live_entries(plan.snapshot)}
               if plan.snapshot is not None else set())
        other = TableScan(self.table.for_branch(branch), self.predicate).plan()
        extra = [s for s in other.splits() if bytes(s.partition) not in own]
        for s in extra:
            s.branch = branch
        return Plan(plan.splits() + extra, plan.snapshot if plan.snapshot is not None else other.snapshot)

    def _plan(self) -> Plan:
        snapshot = self.table.resolve_snapshot(self.snapshot_id, self.tag)
        if snapshot is None:
            return Plan([], None)
        check_readable(self.table.name, self.table.options, snapshot,
                       self.table.manifest_io().index_entries(snapshot))
        entries = self.live_entries(snapshot)
        if self.deletion_vectors:
            entries = [e for e in entries if e.file.level > 0]
        deletions = snapshot_deletion_files(self.table, snapshot)
        groups: dict[tuple[bytes, int], list[ManifestEntry]] = defaultdict(list)
        for e in entries:
            groups[(e.partition, e.bucket)].append(e)
        splits: list[DataSplit] = []
        codec = self.table.partition_codec()
        seen: dict[tuple[tuple[Any, ...], int], list[ManifestEntry]] = {}
        for (partition, bucket), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            try:
                part = codec.from_binary(partition)
            except CorruptFileError as exc:
                raise _entry_error(exc, "partition", [e.file for e in group]) from exc
            bucket_path = self.table.path_factory.bucket_dir(part.spec, bucket)
            # Two encodings of the same partition values (a flipped bit in a BinaryRow's row-kind
            # byte or padding): split apart, the files of one bucket would not be merged. (Other
            # values may share a directory, '' and ' ' both being the default partition.)
            values = (tuple(part.values), bucket)
            if values in seen:
                raise _entry_error(CorruptFileError(f"{partition.hex()} and "
                                                    f"{seen[values][0].partition.hex()} are "
                                                    f"two encodings of partition {part.spec}"),
                                   "partition", [e.file for e in group + seen[values]])
            seen[values] = group
            if not self._bucket_may_match(dict(zip(self.partition_keys, part.values, strict=True)),
                                          bucket, group[0].total_buckets):
                continue
            row = PartitionRow(part.binary, part.values, self.partition_fields)
            bucket_splits = self._bucket_splits(snapshot.id, row, part.values, bucket,
                                                group[0].total_buckets, bucket_path,
                                                [e.file.located(bucket_path) for e in group])
            _attach_deletion_files(bucket_splits, deletions.get((partition, bucket)))
            splits.extend(bucket_splits)
        return Plan(splits, snapshot)

    # ---- pruning ---------------------------------------------------------------------
    def _bucket_may_match(self, partition: dict[str, Any], bucket: int, total_buckets: int) -> bool:
        """Whether rows the predicate keeps can be in `bucket` of this partition."""
        if self.predicate is None or not self.bucket_keys:
            return True
        cache_key = (tuple(partition.items()), total_buckets)
        if cache_key not in self._buckets:
            self._buckets[cache_key] = select_buckets(
                specialise(self.predicate, partition), self.bucket_keys,
                self.table.schema.types_of(self.bucket_keys), total_buckets)
        selected = self._buckets[cache_key]
        return selected is None or bucket in selected

    def live_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """Live data files of `snapshot` that survive partition and key-range pruning."""
        mio = self.table.manifest_io()
        metas = [m for m in mio.data_manifests(snapshot) if self._manifest_may_match(m)]
        merged = mio.merged_entries(metas)
        codec = self.table.partition_codec()
        out = []
        partition_ok: dict[bytes, bool] = {}
        postpone_table = self.table.options.bucket == POSTPONE_BUCKET
        for e in merged:
            check_entry(e, postpone_table, self.primary_key)
            check_features(self.table.name, e)
            if e.bucket == POSTPONE_BUCKET:
                continue
            if self.predicate is not None:
                ok = partition_ok.get(e.partition)
                if ok is None:
                    try:
                        values = codec.from_binary(e.partition).values
                    except CorruptFileError as exc:
                        raise _entry_error(exc, "partition", [e.file]) from exc
                    ranges = {k: (v, v) for k, v in zip(self.partition_keys, values, strict=True)}
                    ok = self.predicate.may_match(ranges)
                    partition_ok[e.partition] = ok
                if not ok:
                    continue
            if e.kind != FileKind.ADD:
                # Every DELETE of a snapshot's manifests cancels an ADD before it (pruning keeps
                # the ADD: it is in the same partition). One left over is an ADD whose kind flipped.
                raise CorruptFileError(
                    f"manifest {e.file.listed_in or '(unknown)'} is damaged: it deletes data file "
                    f"{e.file.file_name} (bucket {e.bucket}), which no manifest of snapshot "
                    f"{snapshot.id} adds")
            if self.predicate is not None and not self._file_keys_may_match(e):
                continue
            if self.predicate is not None and self.deletion_vectors and not self._file_values_may_match(e):
                continue
            if self.entry_filter is not None and not self.entry_filter(e):
                continue
            out.append(e)
        return out

    def _manifest_may_match(self, meta: ManifestFileMeta) -> bool:
        if self.predicate is None or not self.partition_keys:
            return True
        stats = meta.partition_stats
        try:
            types = self.table.schema.types_of(self.partition_keys)
            lo = deserialize_row(stats.min_values, types)
            hi = deserialize_row(stats.max_values, types)
        except Exception:  # stats of another layout: no pruning, never a wrong answer
            return True
        nulls = stats.null_counts or []
        ranges = {}
        for i, k in enumerate(self.partition_keys):
            if i < len(nulls) and nulls[i]:
                continue  # a null partition value is outside [lo, hi]; do not prune on this field
            ranges[k] = (lo[i], hi[i])
        return self.predicate.may_match(ranges)

    def _file_keys_may_match(self, e: ManifestEntry) -> bool:
        if not self.key_names or self.predicate is None:
            return True
        if not (self.predicate.fields() & set(self.key_names)):
            return True
        try:
            lo = deserialize_row(e.file.key_stats.min_values, self.key_types)
            hi = deserialize_row(e.file.key_stats.max_values, self.key_types)
        except Exception:
            return True
        if len(lo) != len(self.key_names):
            return True
        return self.predicate.may_match(dict(zip(self.key_names, zip(lo, hi, strict=True), strict=True)))

    def _file_values_may_match(self, e: ManifestEntry) -> bool:
        """Whether a file's value statistics admit the predicate. Only for tables with deletion
        vectors: their files are read without merging, so a file whose values cannot match holds
        no row of the result (in a merged read an older version of a row may not be skipped)."""
        assert self.predicate is not None
        f = e.file
        stats = f.value_stats
        if f.schema_id != self.table.schema.id or not stats.min_values:
            return True  # another schema's columns, or no statistics: no pruning
        names = list(f.value_stats_cols) if f.value_stats_cols is not None else self.table.schema.field_names
        if not (self.predicate.fields() & set(names)):
            return True
        try:
            types = self.table.schema.types_of(names)
            lo = deserialize_row(stats.min_values, types)
            hi = deserialize_row(stats.max_values, types)
        except Exception:  # statistics of another layout: no pruning, never a wrong answer
            return True
        nulls = stats.null_counts or []
        ranges = {}
        for i, name in enumerate(names):
            if i >= len(nulls) or nulls[i] is None or nulls[i] or i >= len(lo):
                continue  # nulls (or unknown): outside [lo, hi], so this field cannot prune
            ranges[name] = (lo[i], hi[i])
        return self.predicate.may_match(ranges)

    # ---- split generation -------------------------------------------------------------
    def _file_keys(self, files: list[DataFileMeta]) -> dict[bytes, tuple[Any, ...]]:
        """Every `_MIN_KEY` and `_MAX_KEY` of `files`, decoded; a key that does not decode is a
        damaged manifest entry, named with its manifest."""
        keys: dict[bytes, tuple[Any, ...]] = {}
        for f in files:
            for binary in (f.min_key, f.max_key):
                if binary not in keys:
                    try:
                        values = deserialize_row(binary, self.key_types)
                        if any(v is None for v in values):
                            raise CorruptFileError("a primary key field is null")
                        keys[binary] = comparable_key(values)
                    except CorruptFileError as exc:
                        raise _entry_error(exc, "key range", [f]) from exc
        return keys

    def _bucket_splits(self, snapshot_id: int, partition: bytes, values: tuple[Any, ...], bucket: int,
                       total_buckets: int, bucket_path: str,
                       files: list[DataFileMeta]) -> list[DataSplit]:
        if self.deletion_vectors:
            # No merge: each file is a section of its own, packed in level and sequence order.
            sections = [[f] for f in sorted(files, key=lambda f: (-f.level, f.min_sequence_number))]
        elif self.key_names:
            sections = interval_partition(files, self._file_keys(files).__getitem__)
        else:
            sections = [[f] for f in sorted(files, key=lambda f: f.min_sequence_number)]
        weights = [sum(max(f.file_size, self.open_file_cost) for f in s) for s in sections]
        splits = []
        for bin_ in ordered_pack(weights, self.target_split_size):
            chosen = [sections[i] for i in bin_]
            raw = all(len(s) == 1 and self._raw_file(s[0]) for s in chosen)
            splits.append(DataSplit(snapshot_id, partition, values, bucket, total_buckets, bucket_path,
                                    chosen, raw))
        return splits

    def _raw_file(self, f: DataFileMeta) -> bool:
        """Whether the rows of `f`, alone in its section (no other file of the split holds its
        keys), are the read's rows as stored: no retraction (`_DELETE_ROW_COUNT` known 0), no
        merge-engine work on a single row, a parquet file whose columns read by name as the scan's
        schema (`_reads_by_name`), so a parquet reader may read it as it is (Paimon's
        `rawConvertible`; columns added since the file was written read as nulls)."""
        if not self.primary_key:
            return self._reads_as_is(f)
        return (f.delete_row_count == 0 and self.merge_free_single_rows and self._reads_as_is(f))

    def _reads_as_is(self, f: DataFileMeta) -> bool:
        if f.file_name.endswith((".orc", ".avro")):
            return False
        found = self._as_is.get(f.schema_id)
        if found is None:
            try:
                old = self.table.schema_by_id(f.schema_id)
            except LakehouseError:
                found = False  # the read reports a missing schema; here, only: not as is
            else:
                found = _reads_by_name(old, self.table.schema)
            self._as_is[f.schema_id] = found
        return found


def _attach_deletion_files(splits: list[DataSplit], files: dict[str, DeletionFile] | None) -> None:
    """Give each split the deletion vectors of its files (none: the bucket has no vectors)."""
    if not files:
        return
    for split in splits:
        split.data_deletion_files = [files.get(f.file_name) for f in split.files]


def _reads_by_name(old: TableSchema, new: TableSchema) -> bool:
    """Whether a file of schema `old`, read by column name as schema `new`, gives `new`'s values:
    every field of `new` is in `old` with the same id, name and type, or was added since (no field
    of `old` has its id or its name: a reader by name finds no column and reads nulls, as the
    engine does). A renamed, retyped or dropped-and-re-added field needs the engine's mapping."""
    by_id = {f.id: f for f in old.fields}
    old_names = {f.name for f in old.fields}
    for f in new.fields:
        before = by_id.get(f.id)
        if before is None:
            if f.name in old_names:
                return False
        elif before.name != f.name or before.type.copy(True) != f.type.copy(True):
            return False
    return True


def _entry_error(exc: CorruptFileError, what: str, files: list[DataFileMeta]) -> CorruptFileError:
    """`exc` (a field of manifest entries that cannot be right) naming the manifests and files."""
    manifests = sorted({f.listed_in for f in files if f.listed_in is not None})
    names = ", ".join(f.file_name for f in files[:3]) + (", ..." if len(files) > 3 else "")
    return CorruptFileError(f"manifest {' or '.join(manifests) or '(unknown)'} is damaged: the "
                            f"{what} of its entry for data file(s) {names}: {exc}")
