"""CompactTask: the picklable unit of compaction work for one (partition, bucket)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakehouse_engine.format.manifest_entries import DataFileMeta


@dataclass
class CompactTask:
    """Compact the live files of one (partition, bucket) as of `snapshot_id`.

    Created on a driver by `plan_compaction`, run anywhere by `run_compact_task`, and the
    resulting CommitMessages committed once, so compaction can spread over Spark executors.
    """

    snapshot_id: int
    partition: bytes
    bucket: int
    total_buckets: int
    files: list[DataFileMeta] = field(default_factory=list)
    full: bool = False
    #: Take only level 0 up into one new run (`universal.pick_level0_up`), merging no other run.
    level0_only: bool = False
