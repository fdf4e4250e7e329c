"""Which bucket each written row goes to, by the table's bucket mode.

Fixed: the bucket key's hash modulo the partition's bucket count (a rescaled partition keeps its
own). Dynamic: the hash index's assigner. Cross-partition: the global index routes the rows
first (it may move a key to another partition). Postpone: `bucket-postpone`. Unaware: bucket 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse_engine.bucket.cross_partition import CrossPartitionRouter
from lakehouse_engine.bucket.dynamic import DynamicBucketAssigner
from lakehouse_engine.errors import UnsupportedError
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.format.features import check_entry, check_writable
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.options.support import BUCKET_FUNCTION_TYPE
from lakehouse_engine.partition import Partition
from lakehouse_engine.path_factory import POSTPONE_BUCKET
from lakehouse_engine.schema import BucketMode

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

UNAWARE_BUCKET = 0


@dataclass
class RestoredState:
    """What a writer needs of the latest snapshot, read once: the next sequence numbers, the
    bucket count of each partition and each bucket's files (for the writer's compaction)."""

    latest: Snapshot | None = None
    max_sequence: dict[tuple[bytes, int], int] = field(default_factory=dict)
    bucket_counts: dict[bytes, int] = field(default_factory=dict)
    bucket_files: dict[tuple[bytes, int], list[DataFileMeta]] = field(default_factory=dict)

    @staticmethod
    def read(table: FileStore) -> RestoredState:
        return table.read_latest(lambda latest: RestoredState._read(table, latest))

    @staticmethod
    def _read(table: FileStore, latest: Snapshot | None) -> RestoredState:
        state = RestoredState(latest)
        mio = table.manifest_io()
        # A write must not add files the table's other readers would misread, nor compact files
        # whose rows this engine does not read right.
        check_writable(table.name, table.options, latest, mio.index_entries(latest),
                       table.schema.has_primary_key)
        for e in mio.live_entries(latest):
            check_entry(table.name, e)
            key = (e.partition, e.bucket)
            state.max_sequence[key] = max(state.max_sequence.get(key, -1), e.file.max_sequence_number)
            state.bucket_files.setdefault(key, []).append(e.file)
            if e.total_buckets > 0:
                state.bucket_counts[e.partition] = e.total_buckets
        return state

    @property
    def latest_snapshot_id(self) -> int | None:
        return self.latest.id if self.latest is not None else None


def bucket_function_type(table: FileStore) -> str:
    """The table's `bucket-function.type` (default, mod, hive), lower case."""
    return str(table.options.raw.get(BUCKET_FUNCTION_TYPE, "default")).strip().lower()


def check_default_bucket_function(table: FileStore) -> None:
    """UnsupportedError before rows are hashed into fixed buckets of a table whose bucket function
    is not Paimon's default hash (a postpone-bucket table may name `mod` or `hive`)."""
    kind = bucket_function_type(table)
    if kind != "default":
        raise UnsupportedError(
            f"table {table.name}: option '{BUCKET_FUNCTION_TYPE}' = '{kind}': this engine assigns fixed "
            f"buckets with Paimon's default hash only; write this table's rows to the postpone bucket "
            f"and compact them with Paimon (Java), which applies the '{kind}' bucket function")


class BucketRouter:
    """Assigns buckets to the rows of one TableWrite."""

    def __init__(self, table: FileStore, mode: BucketMode, restored: Callable[[], RestoredState],
                 num_buckets: int, fixed_buckets: Mapping[bytes, int] | None = None,
                 num_assigners: int = 1, assigner_id: int = 0, fresh: bool = False):
        """`restored` gives the writer's (lazily read) RestoredState; `fixed_buckets`: bucket
        counts per partition that override the table's (postpone compaction, rescale); the
        assigner arguments are those of `TableWrite`."""
        self.table = table
        self.mode = mode
        self._restored = restored
        self.num_buckets = num_buckets
        self.fixed_buckets = dict(fixed_buckets) if fixed_buckets is not None else None
        self._assigner_args = (num_assigners, assigner_id, fresh)
        schema = table.schema
        self.key_names = schema.trimmed_primary_keys if schema.has_primary_key else []
        self.key_types = schema.types_of(self.key_names)
        self.bucket_keys = schema.bucket_keys
        self.bucket_key_types = schema.types_of(self.bucket_keys)
        self.assigner: DynamicBucketAssigner | None = None
        self.router: CrossPartitionRouter | None = None

    def _latest(self) -> Snapshot | None:
        return self._restored().latest

    def route(self, rows: pa.Table, kinds: np.ndarray) -> tuple[pa.Table, np.ndarray, np.ndarray | None]:
        """Cross-partition mode: the rows as the global index routes them (a key that moved
        partition also retracts its old row) and their buckets; other modes: as given, None."""
        if self.mode is not BucketMode.CROSS_PARTITION:
            return rows, kinds, None
        if self.router is None:
            self.router = CrossPartitionRouter(self.table, self._latest())
        return self.router.route(rows, kinds)

    def dynamic_assigner(self) -> DynamicBucketAssigner:
        """The dynamic bucket assigner (restored from the latest snapshot on first use)."""
        if self.assigner is None:
            n, i, fresh = self._assigner_args
            self.assigner = DynamicBucketAssigner(self.table, self._latest(), n, i, fresh)
        return self.assigner

    def assign(self, rows: pa.Table, part_ids: np.ndarray, partitions: list[Partition],
               routed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Bucket per row and bucket count per partition; `routed`: the buckets `route` gave."""
        n = rows.num_rows
        if self.mode is BucketMode.BUCKET_UNAWARE:
            return np.full(n, UNAWARE_BUCKET, dtype=np.int64), np.full(len(partitions), -1)
        if self.mode is BucketMode.CROSS_PARTITION:
            assert routed is not None
            return routed, np.full(len(partitions), -1)
        if self.mode is BucketMode.POSTPONE_MODE:
            return np.full(n, POSTPONE_BUCKET, dtype=np.int64), np.full(len(partitions), POSTPONE_BUCKET)
        if self.mode is BucketMode.HASH_DYNAMIC:
            assigner = self.dynamic_assigner()
            hashes = hash_rows([rows.column(k) for k in self.key_names], self.key_types)
            buckets = np.empty(n, dtype=np.int64)
            if len(partitions) == 1:
                buckets[:] = assigner.assign(partitions[0], hashes)
            else:
                order = np.argsort(part_ids, kind="stable")  # keeps arrival order per partition
                bounds = np.searchsorted(part_ids[order], np.arange(len(partitions) + 1))
                for pid, part in enumerate(partitions):
                    chosen = order[bounds[pid]:bounds[pid + 1]]
                    buckets[chosen] = assigner.assign(part, hashes[chosen])
            return buckets, np.full(len(partitions), -1)
        check_default_bucket_function(self.table)
        known = self.fixed_buckets if self.fixed_buckets is not None else self._restored().bucket_counts
        totals = np.array([known.get(p.binary, self.num_buckets) for p in partitions], dtype=np.int64)
        hashes = hash_rows([rows.column(k) for k in self.bucket_keys], self.bucket_key_types)
        counts = int(totals[0]) if (totals == totals[0]).all() else totals[part_ids]
        return bucket_of(hashes, counts).astype(np.int64), totals
