"""CommitMessage: what one writer (in any process) hands to the committer for one bucket."""

from __future__ import annotations

from dataclasses import dataclass, field

from lakehouse_engine.format.manifest import DataFileMeta


@dataclass
class CommitMessage:
    """New and compacted files of one (partition, bucket); picklable, so it can cross processes."""

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: list[DataFileMeta] = field(default_factory=list)
    compact_before: list[DataFileMeta] = field(default_factory=list)
    compact_after: list[DataFileMeta] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.new_files or self.compact_before or self.compact_after)
