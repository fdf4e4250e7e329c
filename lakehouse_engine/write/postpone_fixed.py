"""Batch writes of a postpone-bucket table (`bucket` = -2) straight into fixed buckets: pypaimon
2.1.0's `new_postpone_fixed_bucket_write_builder()` and Paimon's `postpone.batch-write-fixed-bucket`.

The rows are readable at once, as a fixed-bucket table's. A partition that has fixed buckets keeps
their count. A partition written for the first time gets `postpone.default-bucket-num` buckets when
the option is set, else as many as its input needs: its rows over `postpone.target-row-num-per-bucket`,
or its size (estimated as Paimon's binary rows, as pypaimon estimates it) over
`postpone.target-size-per-bucket`, at most `postpone.batch-write-fixed-bucket.max-parallelism`.
Rows of such a partition wait in memory until `prepare_commit`, which knows its whole input.

A partition that still holds postponed rows (written to the postpone bucket, not compacted yet) is
written to the postpone bucket again: its next compaction moves rows in commit order, so these
newer rows still win over the older ones (written to fixed buckets first, a compaction would place
the older postponed rows above them). Two writers giving a new partition different bucket counts:
the second commit fails (CommitConflictError), as a write into a rescaled partition does.

`with_bucket_plan(PostponeBucketPlan({(partition values): count}))` gives the counts instead (a
coordinator that planned them once for many writers, as pypaimon's): every partition written must
be in the plan. A count other than the partition's current one is a rescale, which only an
overwrite of that partition may do; an overwrite also writes a partition holding postponed rows
to fixed buckets, as those rows are replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import InvalidArgumentError, InvalidOptionError, SchemaError
from lakehouse_engine.format.snapshot import BATCH_COMMIT_IDENTIFIER
from lakehouse_engine.options import (
    POSTPONE_BATCH_WRITE_FIXED_BUCKET,
    POSTPONE_BATCH_WRITE_FIXED_BUCKET_MAX_PARALLELISM,
    POSTPONE_DEFAULT_BUCKET_NUM,
    POSTPONE_TARGET_ROW_NUM_PER_BUCKET,
    POSTPONE_TARGET_SIZE_PER_BUCKET,
)
from lakehouse_engine.partition import PartitionCodec
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.types import (
    ARRAY,
    BINARY,
    BYTES,
    CHAR,
    DECIMAL,
    MAP,
    ROW,
    STRING,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    VARBINARY,
    VARCHAR,
    DataType,
)
from lakehouse_engine.write.bucket_router import bucket_function_type
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.table_write import TableWrite
from lakehouse_engine.write.write_builder import BatchWriteBuilder
from lakehouse_engine.write.write_roles import NEW_DATA, OVERWRITE_DATA, FixedBuckets, OutputRole

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from lakehouse_engine.store.file_store import FileStore

_VARIABLE = (STRING, VARCHAR, CHAR, BYTES, VARBINARY, BINARY)


def binary_row_sizes(rows: pa.Table, types: list[DataType]) -> np.ndarray:
    """Each row's size as Paimon's BinaryRow (int64): the null bits and 8 bytes per field, plus
    strings and binaries longer than 7 bytes in whole words, 16 bytes per DECIMAL above precision
    18 and 8 per TIMESTAMP above precision 3. Nested values count their Arrow size, shared evenly."""
    n = len(types)
    sizes = np.full(rows.num_rows, ((n + 71) // 64) * 8 + n * 8, dtype=np.int64)
    for column, data_type in zip(rows.columns, types, strict=True):
        root = data_type.root
        if root in _VARIABLE:
            lengths = pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False).astype(np.int64)
            sizes += np.where(lengths <= 7, 0, (lengths + 7) // 8 * 8)
        elif root == DECIMAL and (data_type.precision or 0) > 18:
            sizes += 16
        elif root in (TIMESTAMP, TIMESTAMP_LTZ) and (data_type.precision or 0) > 3:
            sizes += 8
        elif root in (ARRAY, MAP, ROW) and rows.num_rows:
            sizes += -(-column.nbytes // rows.num_rows)
    return sizes


class PostponeBucketPlan:
    """pypaimon's resolved bucket counts by partition: `{(partition values, in partition-key
    order): count}`, given to `PostponeFixedBucketWriteBuilder.with_bucket_plan`."""

    def __init__(self, num_buckets: Mapping[tuple[object, ...], int]):
        plan = {tuple(partition): count for partition, count in dict(num_buckets).items()}
        for partition, count in plan.items():
            if isinstance(count, bool) or not isinstance(count, int) or not 0 < count <= 2**31 - 1:
                raise InvalidArgumentError(
                    f"bucket plan of partition {partition}: total buckets must be a positive 32-bit "
                    f"integer, got {count!r}")
        self._num_buckets = plan

    def contains(self, partition: tuple[object, ...]) -> bool:
        """Whether the plan gives `partition` a count."""
        return tuple(partition) in self._num_buckets

    def num_buckets(self, partition: tuple[object, ...]) -> int:
        """The count of `partition`; InvalidArgumentError (a ValueError) when the plan lacks it."""
        found = self._num_buckets.get(tuple(partition))
        if found is None:
            raise InvalidArgumentError(f"Missing bucket plan for partition {tuple(partition)}")
        return found

    def as_dict(self) -> dict[tuple[object, ...], int]:
        """The plan as a new dict."""
        return dict(self._num_buckets)


class PostponeFixedBucketWrite(TableWrite):
    """A TableWrite of a postpone-bucket table into fixed buckets (see the module)."""

    def __init__(self, table: FileStore, commit_user: str, role: OutputRole,
                 bucket_plan: PostponeBucketPlan | None = None):
        counts: dict[bytes, int] = {}
        self._postponed: set[bytes] = set()
        latest = table.latest_snapshot()
        if latest is not None:
            for e in table.manifest_io().live_entries(latest):
                if e.bucket == POSTPONE_BUCKET:
                    self._postponed.add(e.partition)
                elif e.total_buckets > 0:
                    counts[e.partition] = e.total_buckets
        overwrite = role.replaces
        if overwrite:
            # The partitions written are replaced: their postponed rows and their old count go.
            self._postponed = set()
        self._planned: set[bytes] | None = None
        if bucket_plan is not None:
            self._planned = set()
            keys = PartitionCodec(table.schema)
            for values, count in bucket_plan.as_dict().items():
                if len(values) != len(keys.keys):
                    raise InvalidArgumentError(
                        f"bucket plan partition {values} has {len(values)} values; table {table.name} "
                        f"is partitioned by {list(keys.keys)}")
                binary = keys.from_values(values).binary
                current = counts.get(binary)
                if current is not None and current != count and not overwrite:
                    raise InvalidArgumentError(
                        f"table {table.name}: the bucket plan gives partition {values} {count} buckets, "
                        f"but it has {current}; only an overwrite of the partition may rescale it")
                counts[binary] = count
                self._planned.add(binary)
        super().__init__(table, commit_user, FixedBuckets(counts, 1), role)
        self._waiting: list[tuple[pa.Table, np.ndarray]] = []
        self._to_postpone_bucket: TableWrite | None = None

    def _fixed_counts(self) -> dict[bytes, int]:
        counts = self.buckets.fixed_buckets
        assert counts is not None  # a FixedBuckets writer
        return counts

    def write_rows(self, table: pa.Table, kinds: np.ndarray) -> None:
        """Rows of partitions with fixed buckets are written; rows of partitions with postponed
        rows go to the postpone bucket; rows of new partitions wait for `prepare_commit`."""
        if table.num_rows == 0:
            return
        part_ids, partitions = self.partitions.group_rows(table)
        counts = self._fixed_counts()
        if self._planned is not None:
            for p in partitions:
                if p.binary not in self._planned:
                    raise InvalidArgumentError(f"Missing bucket plan for partition {p.values}")
        kind = np.array([0 if p.binary in counts else 1 if p.binary in self._postponed else 2
                         for p in partitions], dtype=np.int8)[part_ids]
        for k in (0, 1, 2):
            chosen = np.flatnonzero(kind == k)
            if len(chosen) == 0:
                continue
            rows = table if len(chosen) == table.num_rows else table.take(pa.array(chosen))
            if k == 0:
                super().write_rows(rows, kinds[chosen])
            elif k == 1:
                if self._to_postpone_bucket is None:
                    self._to_postpone_bucket = TableWrite(self.table, self.commit_user, role=self.role)
                self._to_postpone_bucket.write_rows(rows, kinds[chosen])
            else:
                self._waiting.append((rows, kinds[chosen]))

    def _plan_new_partitions(self) -> None:
        """Give each waiting partition its bucket count (see the module)."""
        opts = self.options
        explicit = POSTPONE_DEFAULT_BUCKET_NUM.key in opts.raw
        per_rows = opts.get(POSTPONE_TARGET_ROW_NUM_PER_BUCKET)
        per_size = opts.require(POSTPONE_TARGET_SIZE_PER_BUCKET)
        most = opts.require(POSTPONE_BATCH_WRITE_FIXED_BUCKET_MAX_PARALLELISM)
        types = [f.type for f in self.schema.fields]
        totals: dict[bytes, list[int]] = {}
        for rows, _ in self._waiting:
            part_ids, partitions = self.partitions.group_rows(rows)
            row_counts = np.bincount(part_ids, minlength=len(partitions))
            sizes = (np.bincount(part_ids, weights=binary_row_sizes(rows, types), minlength=len(partitions))
                     if not explicit and per_rows is None else np.zeros(len(partitions)))
            for i, p in enumerate(partitions):
                total = totals.setdefault(p.binary, [0, 0])
                total[0] += int(row_counts[i])
                total[1] += int(sizes[i])
        counts = self._fixed_counts()
        for partition, (row_count, size) in totals.items():
            if explicit:
                counts[partition] = opts.require(POSTPONE_DEFAULT_BUCKET_NUM)
            else:
                need = -(-row_count // per_rows) if per_rows is not None else -(-size // per_size)
                counts[partition] = min(max(1, need), most)

    def prepare_commit(self, commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> list[CommitMessage]:
        """Plan the new partitions' buckets, write their rows, and return every bucket's message."""
        if self._waiting:
            self._plan_new_partitions()
            waiting, self._waiting = self._waiting, []
            for rows, kinds in waiting:
                super().write_rows(rows, kinds)
        messages = super().prepare_commit(commit_identifier)
        if self._to_postpone_bucket is not None:
            messages += self._to_postpone_bucket.prepare_commit()
        return messages

    def abort(self, messages: Iterable[CommitMessage] | None = None) -> None:
        """As TableWrite.abort, for the rows written to the postpone bucket too."""
        if messages is None and self._to_postpone_bucket is not None:
            self._to_postpone_bucket.abort()
        super().abort(messages)

    def close(self) -> None:
        self._waiting = []
        if self._to_postpone_bucket is not None:
            self._to_postpone_bucket.close()
        super().close()


class PostponeFixedBucketWriteBuilder(BatchWriteBuilder):
    """pypaimon's builder of a batch write into a postpone-bucket table's fixed buckets (see the
    module); with `postpone.batch-write-fixed-bucket` = false its writes go to the postpone bucket."""

    def __init__(self, table: FileStore, expire: Callable[[], None] | None = None):
        if table.options.bucket != POSTPONE_BUCKET:
            raise SchemaError(
                f"table {table.name} has 'bucket' = {table.options.bucket}; the postpone fixed-bucket "
                f"write builder is for postpone-bucket tables ('bucket' = -2)")
        super().__init__(table, expire)
        self.bucket_plan: PostponeBucketPlan | None = None

    def with_bucket_plan(self, bucket_plan: PostponeBucketPlan) -> PostponeFixedBucketWriteBuilder:
        """Write with these bucket counts by partition instead of planning them (see the module)."""
        self.bucket_plan = bucket_plan
        return self

    def new_write(self, num_assigners: int = 1, assigner_id: int = 0) -> TableWrite:
        """A writer into fixed buckets (or the postpone bucket, as the option says)."""
        if not self.table.options.require(POSTPONE_BATCH_WRITE_FIXED_BUCKET):
            return super().new_write(num_assigners, assigner_id)
        kind = bucket_function_type(self.table)
        if kind != "default":
            # pypaimon's refusal, in its words: fixed buckets here are Paimon's default hash.
            raise InvalidOptionError(
                f"table {self.table.name}: Postpone fixed bucket writes only support "
                f"bucket-function.type=default, got {kind}; write with new_batch_write_builder() (the "
                f"postpone bucket) and compact with Paimon (Java)")
        return PostponeFixedBucketWrite(self.table, self.commit_user,
                                        NEW_DATA if self.static_partition is None else OVERWRITE_DATA,
                                        self.bucket_plan)
