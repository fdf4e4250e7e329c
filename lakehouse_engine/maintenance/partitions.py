"""Partitions of a table as a catalog lists them (Paimon's `Partition` statistics), and dropping them.

Listing reads the latest snapshot's manifests only (no data file is opened). Dropping partitions
or truncating the table is one OVERWRITE snapshot that deletes every live file of the partitions
(as pypaimon's `truncate_partitions` / `truncate_table` and Paimon's `drop partition` do): older
snapshots and tags still see the rows until they expire.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Generic, TypeVar

from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.maintenance.expire import expire_after_commit
from lakehouse_engine.write.write_builder import BatchWriteBuilder

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

T = TypeVar("T")


@dataclass(frozen=True)
class PagedList(Generic[T]):
    """pypaimon's `PagedList`: one page of a listing and the token of the next (None: last page)."""

    elements: list[T]
    next_page_token: str | None = None


@dataclass(frozen=True)
class PartitionStatistics:
    """One partition of a table's latest snapshot (pypaimon's `Partition`, Java's
    `PartitionStatistics`): its spec (values as Paimon writes them in directory names), rows,
    size and file count of its live data files, buckets holding them, and the newest file's
    creation time (epoch ms, the last time the partition changed)."""

    spec: dict[str, str]
    record_count: int
    file_size_in_bytes: int
    file_count: int
    last_file_creation_time: int
    total_buckets: int

    @property
    def name(self) -> str:
        """The partition as `k=v,k2=v2` (how pypaimon names and filters it)."""
        return ",".join(f"{k}={v}" for k, v in self.spec.items())


def list_partitions(table: FileStore) -> list[PartitionStatistics]:
    """Every partition of `table`'s latest snapshot with its statistics, sorted by name."""
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return []
    codec = table.partition_codec()
    stats: dict[bytes, list[int]] = {}  # partition -> [rows, bytes, files, newest ms]
    buckets: dict[bytes, set[int]] = {}
    for e in table.manifest_io().live_entries(snapshot):
        s = stats.setdefault(e.partition, [0, 0, 0, 0])
        s[0] += e.file.row_count
        s[1] += e.file.file_size
        s[2] += 1
        s[3] = max(s[3], e.file.creation_time_millis or 0)
        buckets.setdefault(e.partition, set()).add(e.bucket)
    out = [PartitionStatistics(dict(codec.from_binary(p).spec), s[0], s[1], s[2], s[3], len(buckets[p]))
           for p, s in stats.items()]
    return sorted(out, key=lambda p: p.name)


def page_partitions(partitions: list[PartitionStatistics], max_results: int | None,
                    page_token: str | None, pattern: str | None) -> PagedList[PartitionStatistics]:
    """One page of `partitions`: those named like `pattern` (`*` any text), after `page_token`
    (the previous page's last partition name), at most `max_results`."""
    if pattern:
        regex = re.compile(re.escape(pattern).replace(r"\*", ".*"))
        partitions = [p for p in partitions if regex.fullmatch(p.name)]
    if page_token:
        partitions = [p for p in partitions if p.name > page_token]
    if max_results is not None and 0 < max_results < len(partitions):
        page = partitions[:max_results]
        return PagedList(page, page[-1].name)
    return PagedList(partitions, None)


def drop_partitions(table: FileStore, partitions: Sequence[Mapping[str, object]]) -> int:
    """Delete every row of `partitions` (full or partial specs) in one OVERWRITE snapshot; its id.

    Raises LakehouseError, changing nothing, for an empty list or a key that is not a partition
    key, and for a table without partition keys.
    """
    specs = [dict(p) for p in partitions]
    if not specs or any(not s for s in specs):
        raise LakehouseError(
            f"drop_partitions of table {table.name} needs at least one non-empty partition spec "
            f"(use truncate_table to remove every row)")
    if not table.schema.partition_keys:
        raise LakehouseError(f"table {table.name} has no partition keys; use truncate_table")
    return _overwrite(table, specs)


def truncate(table: FileStore) -> int | None:
    """Delete every row of `table` in one OVERWRITE snapshot; its id (None: nothing to truncate)."""
    if table.latest_snapshot() is None:
        return None
    return _overwrite(table, [{}])


def _overwrite(table: FileStore, specs: list[dict[str, object]]) -> int:
    commit = BatchWriteBuilder(table, expire=partial(expire_after_commit, table)).new_commit()
    return (commit.truncate_table() if specs == [{}] else commit.truncate_partitions(specs))[0]
